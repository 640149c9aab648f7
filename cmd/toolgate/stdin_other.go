//go:build !unix

package main

import "os"

// pollableStdin leaves stdin as it is: see stdin_unix.go.
func pollableStdin(f *os.File, _ ...*os.File) (*os.File, func()) { return f, func() {} }
