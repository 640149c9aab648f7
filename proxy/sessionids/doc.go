// Package sessionids mints and checks the Mcp-Session-Id of 2025-era
// Streamable HTTP sessions, so that a session a client ended with DELETE
// stays ended: a later request naming it is answered 404, as the MCP
// specification says, on this replica and on every other one.
//
// It exists because mcp-go's default manager (StatelessGeneratingSessionIdManager)
// accepts any well-formed id, which is what lets any replica serve a
// session another replica opened, and forgets every termination: after a
// DELETE, a POST with the same id was served as if nothing had happened.
// Its stateful manager is no answer for replicas: it refuses every id it did
// not mint itself.
//
// The Manager keeps accepting any well-formed id, and refuses the ids of
// terminated sessions. Validate runs on every request, so it never waits
// on the network for an id it has seen before: it looks in two bounded
// sets in memory, the ids terminated (kept for the session idle TTL) and,
// with a shared store, the ids this replica knows were not terminated when
// it last looked. With a shared store (Redis, state.redis), a termination
// is recorded there and announced to every replica, which adds it to its
// own set; an id this replica has not seen yet is looked up in the store
// once, and the answer kept, so a replica that missed the announcement (it
// was cut off, or started later) still refuses it. A replica that hears
// its subscription was lost and is back forgets which ids it knew, and looks
// each up once more.
//
// A store that cannot be reached never refuses a request: the id is
// accepted (counted as a failure of the store, and looked up again next
// time). A session id is not a credential: every request is authenticated
// on its own, and proxy's bindSession keeps a session to the principal that
// opened it on the replica that did; accepting a terminated id for the
// length of an outage serves nobody who could not open a session anyway.
//
// Only its owner's DELETE terminates a session here: the principal the
// session was minted for (Options.Principal), which the replica that minted
// it keeps, and records in the shared store for the others. proxy's
// bindSession asks MayEnd before mcp-go sees a DELETE: another principal's
// is answered 404 and ends nothing; one whose owner cannot be told (no
// replica recorded one, or the store cannot be asked) ends the session on
// this replica only, as mcp-go did before this package (its state here is
// dropped; the id is neither refused nor announced, since the requester may
// be anyone). Otherwise any principal knowing an id (ids appear in audit
// records and logs) could end the session for every replica, and each
// DELETE of a made-up id would cost a key and a message in the store.
//
// mcp-go also calls Terminate when it drops a session idle for the idle
// TTL and when the endpoint shuts down; neither is a termination another
// replica should hear of (the session may be busy there, and a replica that
// stops leaves its sessions to the others), so the Resolver hands those
// calls a view whose Terminate records nothing. mcp-go's own cleanup of the
// session's state runs after Terminate as before, in every case.
package sessionids
