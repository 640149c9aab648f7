package console

import (
	"errors"
	"net/http"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/audit"
)

// trailResult is one trail's verification as the audit page shows it.
type trailResult struct {
	Trail    string   // the trail's newest file
	Files    []string // oldest first, as verified
	Intact   bool
	Summary  string   // the report (audit.Report.String) when intact, else the error
	Problems []string // file:line: what is wrong, when tampered
	More     bool     // more problems than listed
}

type auditPage struct {
	page
	Off      bool   // no audit trail
	Path     string // audit.file
	Verified bool   // the page shows a verification's result
	Took     time.Duration
	Trails   []trailResult
	Intact   bool // every trail is
}

func (c *Console) auditPage(w http.ResponseWriter, r *http.Request, s *Session) {
	p := auditPage{page: c.base(r, s, "Audit", ""), Path: c.o.AuditPath, Off: c.o.AuditPath == ""}
	c.render(w, r, http.StatusOK, "audit", p)
}

// verifyAudit checks the chain of every trail of the audit file (the file and the slots other
// processes wrote beside it), as `toolgate audit verify --config` does, and shows the result. It is
// a POST (with the session's CSRF token) because it is costly, not because it changes anything.
func (c *Console) verifyAudit(w http.ResponseWriter, r *http.Request, s *Session) {
	p := auditPage{page: c.base(r, s, "Audit", ""), Path: c.o.AuditPath, Off: c.o.AuditPath == ""}
	if p.Off {
		c.render(w, r, http.StatusNotFound, "audit", p)
		return
	}
	if !c.verifying.TryLock() {
		p.Error = "A verification is running already; wait for it and try again."
		c.render(w, r, http.StatusTooManyRequests, "audit", p)
		return
	}
	defer c.verifying.Unlock()
	start := time.Now()
	trails, err := audit.Trails(c.o.AuditPath)
	if err != nil {
		c.o.Log.Error("console: audit trails not listed", "err", err)
		p.Error = "The audit trail's directory cannot be read; see the gateway log."
		c.render(w, r, http.StatusInternalServerError, "audit", p)
		return
	}
	p.Verified, p.Intact = true, len(trails) > 0
	for _, trail := range trails {
		res := verifyTrail(trail)
		p.Intact = p.Intact && res.Intact
		p.Trails = append(p.Trails, res)
	}
	p.Took = time.Since(start).Round(10 * time.Microsecond)
	c.o.Log.Info("console: audit trail verified", "approver", s.Approver, "intact", p.Intact, "trails", len(p.Trails), "took", p.Took)
	c.render(w, r, http.StatusOK, "audit", p)
}

func verifyTrail(trail string) trailResult {
	res := trailResult{Trail: trail}
	files, err := audit.Files(trail)
	if err != nil {
		res.Summary = err.Error()
		return res
	}
	for _, f := range files {
		res.Files = append(res.Files, filepath.Base(f))
	}
	rep, err := audit.Verify(files...)
	var te *audit.TamperError
	switch {
	case errors.As(err, &te):
		res.Summary = "TAMPERED: the chain does not hold."
		for _, pr := range te.Problems {
			pr.File = filepath.Base(pr.File)
			res.Problems = append(res.Problems, pr.String())
		}
		res.More = te.More
	case err != nil:
		res.Summary = "Not verified: " + err.Error()
	default:
		res.Intact, res.Summary = true, rep.String()
	}
	return res
}
