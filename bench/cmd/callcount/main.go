// Command callcount drives a fixed number of echo calls, one at a time or
// from several sessions, through a gateway it starts, and then asks
// callgrind to dump its counts: the gateway's instructions per call,
// which do not depend on what else the machine is doing, unlike the load
// harness's wall-clock figures (issue 22). See bench/README.md,
// "Instructions per call".
//
//	callcount [-calls N] [-sessions S] [-tool T] [-url URL] -- COMMAND [ARG]...
//
// COMMAND is the gateway, usually under valgrind --tool=callgrind. Without
// -url it is spoken to over stdio (one session; the calls one at a time);
// with -url over Streamable HTTP (S sessions, each calling back to back),
// sending "Authorization: Bearer test" and waiting until the URL answers.
// Each call's answer must carry its message back. After the last answer,
// callcount runs `callgrind_control -d` on the command's process (callgrind
// aborts on some Go programs' exit, so the counts are taken before it),
// then ends the command.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	calls := flag.Int("calls", 1000, "calls in all")
	sessions := flag.Int("sessions", 1, "Streamable HTTP sessions calling at once")
	tool := flag.String("tool", "echo", "the tool, which must echo its message argument")
	url := flag.String("url", "", "the gateway's Streamable HTTP endpoint; stdio when empty")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: callcount [-calls N] [-sessions S] [-tool T] [-url URL] -- COMMAND [ARG]...")
		os.Exit(2)
	}
	if err := run(*calls, *sessions, *tool, *url, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "callcount:", err)
		os.Exit(1)
	}
}

func run(calls, sessions int, tool, url string, command []string) error {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if url == "" {
		err = overStdio(in, bufio.NewReaderSize(out, 1<<20), tool, calls)
	} else {
		go func() { _, _ = io.Copy(io.Discard, out) }()
		err = overHTTP(url, tool, calls, sessions)
	}
	if err != nil {
		return err
	}
	dump := exec.Command("callgrind_control", "-d", strconv.Itoa(cmd.Process.Pid))
	dump.Stdout, dump.Stderr = os.Stderr, os.Stderr
	return dump.Run()
}

const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"callcount","version":"1"}}}`

func callBody(id int, tool, message string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"message":%q}}}`, id, tool, message)
}

// checkAnswer wants message back and no error.
func checkAnswer(answer []byte, message string) error {
	if !bytes.Contains(answer, []byte(message)) || bytes.Contains(answer, []byte(`"isError":true`)) {
		return fmt.Errorf("unexpected answer: %.300s", answer)
	}
	return nil
}

func overStdio(in io.Writer, out *bufio.Reader, tool string, calls int) error {
	answer := func(id int) ([]byte, error) {
		want := []byte(fmt.Sprintf(`"id":%d,`, id))
		for {
			line, err := out.ReadBytes('\n')
			if err != nil {
				return nil, err
			}
			if bytes.Contains(line, want) && !bytes.Contains(line, []byte(`"method"`)) {
				return line, nil
			}
		}
	}
	if _, err := io.WriteString(in, initialize+"\n"); err != nil {
		return err
	}
	if _, err := answer(0); err != nil {
		return err
	}
	if _, err := io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		return err
	}
	for i := 1; i <= calls; i++ {
		message := fmt.Sprintf("ping %d", i)
		if _, err := io.WriteString(in, callBody(i, tool, message)+"\n"); err != nil {
			return err
		}
		line, err := answer(i)
		if err == nil {
			err = checkAnswer(line, message)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func overHTTP(url, tool string, calls, sessions int) error {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: sessions}, Timeout: time.Minute}
	if err := awaitURL(hc, url); err != nil {
		return err
	}
	errs := make(chan error, sessions)
	var wg sync.WaitGroup
	for s := range sessions {
		wg.Go(func() { errs <- session(hc, url, tool, s, calls/sessions) })
	}
	wg.Wait()
	close(errs)
	var all error
	for err := range errs {
		all = errors.Join(all, err)
	}
	return all
}

// awaitURL waits, a minute at most, until something answers at url.
func awaitURL(hc *http.Client, url string) error {
	var err error
	for range 600 {
		var resp *http.Response
		if resp, err = hc.Get(url); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond) // a process starting: nothing to wait on but its port
	}
	return err
}

func session(hc *http.Client, url, tool string, s, calls int) error {
	sid := ""
	post := func(body string) (string, []byte, error) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return "", nil, err
		}
		req.Header.Set("Authorization", "Bearer test")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.Header.Get("Mcp-Session-Id"), b, err
	}
	var err error
	if sid, _, err = post(initialize); err != nil {
		return err
	}
	if _, _, err = post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return err
	}
	for i := 1; i <= calls; i++ {
		message := fmt.Sprintf("ping %d-%d", s, i)
		_, answer, err := post(callBody(i, tool, message))
		if err == nil {
			err = checkAnswer(answer, message)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
