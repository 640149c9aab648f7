package pipeline

// MaxToolMessage is maxToolMessage, for the external tests.
const MaxToolMessage = maxToolMessage
