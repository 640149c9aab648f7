package upstreams

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func readAllCapped(t *testing.T, in string, max int, f framing) (string, []string) {
	t.Helper()
	var ids []string
	r := newCapReader(strings.NewReader(in), max, f, func(id []byte) { ids = append(ids, string(id)) })
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(out), ids
}

func TestCapReader(t *testing.T) {
	big := strings.Repeat("x", 200)
	cases := []struct {
		name    string
		in      string
		framing framing
		want    string
		wantIDs []string
	}{
		{"small lines pass unchanged", "{\"id\":1}\n{\"id\":2}\n", frameLine, "{\"id\":1}\n{\"id\":2}\n", nil},
		{"last line without newline", "{\"id\":1}\n{\"a\":2}", frameLine, "{\"id\":1}\n{\"a\":2}", nil},
		{"id first", `{"jsonrpc":"2.0","id":7,"result":{"t":"` + big + "\"}}\n{\"id\":8}\n", frameLine,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32090,"message":"message over 100 bytes"}}` + "\n{\"id\":8}\n", []string{"7"}},
		{"id last, as the TypeScript SDK writes it", `{"result":{"t":"` + big + `","id":99},"jsonrpc":"2.0","id":"gw-3"}` + "\n", frameLine,
			`{"jsonrpc":"2.0","id":"gw-3","error":{"code":-32090,"message":"message over 100 bytes"}}` + "\n", []string{`"gw-3"`}},
		{"nested id is not the message id", `{"result":{"id":5,"t":"` + big + `"}}` + "\n", frameLine, "", nil},
		{"escaped quotes inside strings", `{"result":{"t":"\",\"id\":6,` + big + `"},"id":4}` + "\n", frameLine,
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32090,"message":"message over 100 bytes"}}` + "\n", []string{"4"}},
		{"oversize garbage is dropped", big + "\n{\"id\":1}\n", frameLine, "{\"id\":1}\n", nil},
		{"sse data line keeps its field name", `data: {"id":3,"result":"` + big + "\"}\n\n", frameEvent,
			`data: {"jsonrpc":"2.0","id":3,"error":{"code":-32090,"message":"message over 100 bytes"}}` + "\n\n", []string{"3"}},
		{"whole body mode, pretty printed", "{\n  \"id\": 12,\n  \"result\": \"" + big + "\"\n}\n", frameWhole,
			`{"jsonrpc":"2.0","id":12,"error":{"code":-32090,"message":"message over 100 bytes"}}`, []string{"12"}},
		{"sse event split over many data lines is capped as a whole", "event: message\ndata: {\"id\":5,\n" + strings.Repeat("data: \"x\":\""+strings.Repeat("y", 60)+"\",\n", 4) + "data: \"z\":1}\n\n{\"next\":1}\n", frameEvent,
			`data: {"jsonrpc":"2.0","id":5,"error":{"code":-32090,"message":"message over 100 bytes"}}` + "\n\n{\"next\":1}\n", []string{"5"}},
		{"small sse events pass unchanged", "event: message\ndata: {\"id\":1}\n\n: keepalive\n\ndata: {\"id\":2}\n\n", frameEvent,
			"event: message\ndata: {\"id\":1}\n\n: keepalive\n\ndata: {\"id\":2}\n\n", nil},
		{"whole body within cap", "{\n \"id\": 1\n}\n", frameWhole, "{\n \"id\": 1\n}\n", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ids := readAllCapped(t, c.in, 100, c.framing)
			if got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
			if strings.Join(ids, ",") != strings.Join(c.wantIDs, ",") {
				t.Errorf("oversize ids %v, want %v", ids, c.wantIDs)
			}
		})
	}
}

// endless yields a JSON-RPC response whose result never ends within n bytes.
type endless struct{ n, sent int }

func (e *endless) Read(p []byte) (int, error) {
	if e.sent >= e.n {
		return 0, io.EOF
	}
	head := []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`)
	if e.sent == 0 {
		e.sent = copy(p, head)
		return e.sent, nil
	}
	k := min(len(p), e.n-e.sent)
	copy(p[:k], bytes.Repeat([]byte("x"), k))
	e.sent += k
	return k, nil
}

// A 5 MiB message under the cap is gathered with its buffer doubling, not
// growing a quarter at a time (which allocated five times the message), and
// the buffer is not kept once the message is read.
func TestCapReaderGathersALargeMessageCheaply(t *testing.T) {
	const size = 5 << 20
	line := append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":{"t":"`), strings.Repeat("x", size)...), "\"}}\n"...)
	r := newCapReader(bytes.NewReader(line), 8<<20, frameLine, nil)
	p := make([]byte, 64<<10)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	read := 0
	for {
		n, err := r.Read(p)
		read += n
		if err != nil {
			break
		}
	}
	runtime.ReadMemStats(&after)
	if read != len(line) {
		t.Fatalf("read %d bytes, want %d", read, len(line))
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4*size {
		t.Errorf("allocated %d bytes gathering a %d-byte message, want under four times it", grew, len(line))
	}
	if cap(r.out.b) > maxKeptMessage {
		t.Errorf("kept %d bytes of room after the message was read", cap(r.out.b))
	}
	// Growing toward the cap, the room stops at the cap: a message over it is
	// refused before it would need more.
	var b []byte
	for range 300 {
		b = appendDoubling(b, make([]byte, 32<<10), 8<<20)
		if cap(b) > 8<<20 && len(b) <= 8<<20 {
			t.Fatalf("%d bytes held in %d of room, over the %d byte limit", len(b), cap(b), 8<<20)
		}
	}
}

// A 10 MiB message is refused while it is read: the reader allocates about
// the cap, not the message.
func TestCapReaderDoesNotBufferWholeMessage(t *testing.T) {
	const cap = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := newCapReader(&endless{n: 10 << 20}, cap, frameLine, nil)
	out, err := io.ReadAll(r)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"code":-32090`) {
		t.Fatalf("no stand-in error: %.200s", out)
	}
	// The endless source itself allocates its repeat buffers; allow for
	// those but not for a second copy of the message.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 8*cap+(10<<20) {
		t.Fatalf("allocated %d bytes for a 10 MiB message under a %d byte cap", grew, cap)
	}
}

// The stand-in for an oversize message whose id comes first is out as soon
// as the cap is passed, before the message ends; a message that never ends
// fails the stream after discardLimit, holding no more than the cap.
func TestCapReaderCutsEndlessMessage(t *testing.T) {
	var ids []string
	r := newCapReader(&endlessLine{}, 1024, frameLine, func(id []byte) { ids = append(ids, string(id)) })
	buf := make([]byte, 4096)
	n, err := r.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), `"id":1,"error":{"code":-32090`) || strings.Join(ids, ",") != "1" {
		t.Fatalf("first read %q, %v, ids %v", buf[:n], err, ids)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = io.Copy(io.Discard, r)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, errEndless) {
		t.Fatalf("after the stand-in: %v", err)
	}
	if _, err := r.Read(buf); !errors.Is(err, errEndless) {
		t.Fatalf("the failure is not sticky: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("allocated %d bytes streaming past %d", grew, r.discardLimit())
	}
}

// endlessLine is a JSON-RPC answer that never ends, produced without
// allocating.
type endlessLine struct{ started bool }

var xs = bytes.Repeat([]byte("x"), 64<<10)

func (e *endlessLine) Read(p []byte) (int, error) {
	if !e.started {
		e.started = true
		return copy(p, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`), nil
	}
	return copy(p, xs), nil
}
