package authn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"golang.org/x/time/rate"
)

const (
	// fetchTimeout bounds the first fetch of a jwks_url (so New returns) and each periodic refresh.
	fetchTimeout = 10 * time.Second
	// unknownKIDEvery is the least time between two refreshes caused by tokens naming an unknown kid, so
	// that a stream of made-up kids cannot turn the gateway into a load generator against the IdP.
	unknownKIDEvery = 30 * time.Second
	// unknownKIDWait bounds a refresh caused by an unknown kid, inside the request that caused it. It is
	// also how long such a request may wait for its turn; being far below unknownKIDEvery, in practice a
	// request that finds the refresh budget spent fails at once.
	unknownKIDWait = 5 * time.Second
	// maxJWKSBytes caps a key set document; real ones are a few KiB.
	maxJWKSBytes = 1 << 20
)

// keySource is the JWK Set behind the verifier: a jwks_url kept fresh by jwkset, or a jwks_file kept
// fresh here. close stops its refreshing.
type keySource struct {
	name    string // for logs: the URL (redacted) or the file path
	storage jwkset.Storage
	close   func()
}

func newKeySource(ctx context.Context, j *JWTOptions, refresh, kidEvery time.Duration, log *slog.Logger) (*keySource, error) {
	switch {
	case j.JWKSURL != "" && j.JWKSFile != "":
		return nil, errors.New("authn: set either auth.jwt.jwks_url or auth.jwt.jwks_file, not both")
	case j.JWKSURL != "":
		return newURLSource(ctx, j.JWKSURL, refresh, kidEvery, log)
	case j.JWKSFile != "":
		return newFileSource(ctx, j.JWKSFile, refresh, kidEvery, log)
	}
	return nil, errors.New("authn: auth.jwt needs jwks_url or jwks_file")
}

// newURLSource fetches the key set once (bounded by fetchTimeout) and then every refresh, and again on an
// unknown kid at most once per unknownKIDEvery. jwkset keeps the last good keys when a fetch fails.
func newURLSource(ctx context.Context, rawURL string, refresh, kidEvery time.Duration, log *slog.Logger) (*keySource, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("authn: auth.jwt.jwks_url does not parse: %w", err)
	}
	name := u.Redacted()
	life, cancel := context.WithCancel(ctx)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	client := &http.Client{
		Transport:     capBody{transport},
		Timeout:       fetchTimeout + time.Second, // a backstop; jwkset bounds each fetch with a context
		CheckRedirect: refuseDowngrade,
	}
	onError := func(_ context.Context, err error) {
		log.Warn("cannot fetch the JWT signing keys; keeping the keys already loaded", "jwks_url", name, "err", err)
	}
	remote, err := jwkset.NewStorageFromHTTP(rawURL, jwkset.HTTPClientStorageOptions{
		Client:                    client,
		Ctx:                       life,
		HTTPTimeout:               fetchTimeout,
		NoErrorReturnFirstHTTPReq: true, // an unreachable IdP must not stop the gateway
		RefreshErrorHandler:       onError,
		RefreshInterval:           refresh,
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("authn: auth.jwt.jwks_url %s: %w", name, err)
	}
	storage, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{rawURL: remote},
		RateLimitWaitMax:  unknownKIDWait,
		RefreshUnknownKID: rate.NewLimiter(rate.Every(kidEvery), 1),
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("authn: auth.jwt.jwks_url %s: %w", name, err)
	}
	if keys, _ := storage.KeyReadAll(ctx); len(keys) == 0 {
		log.Error("no JWT signing keys loaded yet: calls with a JWT fail until the key set can be fetched", "jwks_url", name)
	}
	return &keySource{name: name, storage: storage, close: sync.OnceFunc(func() {
		cancel()
		transport.CloseIdleConnections()
	})}, nil
}

// capBody caps every response body at maxJWKSBytes, so a hostile or broken endpoint cannot make the
// gateway buffer an unbounded document.
type capBody struct{ base http.RoundTripper }

func (c capBody) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = http.MaxBytesReader(nil, resp.Body, maxJWKSBytes)
	return resp, nil
}

// refuseDowngrade follows at most 5 redirects, never to plain http off loopback: whoever could answer
// that request could substitute the keys.
func refuseDowngrade(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if req.URL.Scheme != "https" && !isLoopbackHost(req.URL.Hostname()) {
		return fmt.Errorf("refusing a redirect to %s: keys are fetched over https only", req.URL.Redacted())
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// fileKeys is a key set read from a file: re-read every refresh and, at most once per unknownKIDEvery,
// when a token names a kid the file did not have. A failed re-read keeps the keys already loaded.
type fileKeys struct {
	*jwkset.MemoryJWKSet
	path    string
	limiter *rate.Limiter
	log     *slog.Logger
}

func newFileSource(ctx context.Context, path string, refresh, kidEvery time.Duration, log *slog.Logger) (*keySource, error) {
	f := &fileKeys{
		MemoryJWKSet: jwkset.NewMemoryStorage(),
		path:         path,
		limiter:      rate.NewLimiter(rate.Every(kidEvery), 1),
		log:          log,
	}
	if err := f.reload(ctx); err != nil {
		return nil, fmt.Errorf("authn: auth.jwt.jwks_file %s: %w", path, err)
	}
	life, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(refresh)
		defer t.Stop()
		for {
			select {
			case <-life.Done():
				return
			case <-t.C:
				if err := f.reload(life); err != nil {
					log.Warn("cannot re-read the JWT signing keys; keeping the keys already loaded", "jwks_file", path, "err", err)
				}
			}
		}
	})
	return &keySource{name: path, storage: f, close: sync.OnceFunc(func() {
		cancel()
		wg.Wait()
	})}, nil
}

// KeyRead is jwkset.MemoryJWKSet's, plus one re-read of the file on an unknown kid when the rate limit
// allows it.
func (f *fileKeys) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	jwk, err := f.MemoryJWKSet.KeyRead(ctx, kid)
	if !errors.Is(err, jwkset.ErrKeyNotFound) || !f.limiter.Allow() {
		return jwk, err
	}
	if rerr := f.reload(ctx); rerr != nil {
		f.log.Warn("cannot re-read the JWT signing keys; keeping the keys already loaded", "jwks_file", f.path, "err", rerr)
		return jwk, err
	}
	return f.MemoryJWKSet.KeyRead(ctx, kid)
}

func (f *fileKeys) reload(ctx context.Context) error {
	fh, err := os.Open(f.path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is named by the caller
		}
		return fmt.Errorf("cannot read it: %w", err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("cannot read it: %w", err)
	}
	if len(data) > maxJWKSBytes {
		return fmt.Errorf("it is larger than %d bytes", maxJWKSBytes)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return err
	}
	return f.KeyReplaceAll(ctx, keys)
}

// parseJWKS reads a JWK Set document the way jwkset reads one fetched over HTTP: every key validated,
// key types it does not support skipped.
func parseJWKS(data []byte) ([]jwkset.JWK, error) {
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("not a JWK Set (JSON with a \"keys\" list): %w", err)
	}
	var keys []jwkset.JWK
	for i, m := range set.Keys {
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{Private: true}, jwkset.JWKValidateOptions{})
		switch {
		case errors.Is(err, jwkset.ErrUnsupportedKey):
			continue
		case err != nil:
			return nil, fmt.Errorf("key %d (kid %q): %w", i, m.KID, err)
		}
		keys = append(keys, jwk)
	}
	if len(keys) == 0 {
		return nil, errors.New("it holds no usable key")
	}
	return keys, nil
}
