// Package redisstore keeps the replicas' policies in step through Redis
// (the store of package state): a replica that swapped in a new policy
// announces its version, and every other replica re-reads its own files
// (Sync). Announcements travel, never policy. It lives beside package
// authz, which owns the policy and its reloads, so that everything about
// authorization is in one folder; it is a package of its own so that a
// gateway without Redis does not depend on it.
package redisstore
