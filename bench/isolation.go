package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Users of the agent cases.
const (
	noisyUser = "noisy" // saves memory, then searches it from many connections
	quietUser = "quiet" // lists its agents and chats, one request at a time
	turnUser  = "solo"  // the turn-cost case's user, alone on the gateway
)

// IsolationConfig is the noisy-neighbour case (issue 20): how much memory
// the noisy user saves and how hard it searches it while the quiet user is
// measured.
type IsolationConfig struct {
	Entries   int           // memory entries the noisy user saves
	Words     int           // words per entry
	Savers    int           // concurrent saves
	Searchers int           // concurrent memory searches, each in a closed loop
	Duration  time.Duration // the quiet user's measured time per phase
	Warmup    time.Duration // the searches' head start before the quiet user is measured
	Timeout   time.Duration // a request's client-side limit (a failure past it)
	// Pin runs the gatehouses on serverCPU, the load generator (the
	// suite's process, PinLoad) being on loadCPU (issue 35, -pin).
	Pin bool
}

// Pinning (issue 35, -pin): on a 2-core machine the load generator and
// the server otherwise share both cores, and the quiet user's latencies
// include the time the server waits for the generator's goroutines. With
// each on a core of its own they are what the server does with one core.
const (
	loadCPU   = 0
	serverCPU = 1
)

// PinLoad pins every thread of this process (the load generator) to
// loadCPU, with GOMAXPROCS 1 to match; threads and processes it starts
// later inherit the CPU (a gatehouse is then moved to serverCPU).
func PinLoad() error {
	if runtime.NumCPU() < 2 {
		return fmt.Errorf("bench: pinning needs 2 CPUs, this process may use %d", runtime.NumCPU())
	}
	if _, err := pinPID(os.Getpid(), loadCPU); err != nil {
		return err
	}
	runtime.GOMAXPROCS(1)
	return nil
}

// pinServer moves every thread of p to serverCPU and returns taskset's
// report. Started by a pinned suite, p began on loadCPU alone, so its
// runtime chose GOMAXPROCS 1.
func pinServer(p *Proc) (string, error) { return pinPID(p.cmd.Process.Pid, serverCPU) }

// pinPID sets the CPU affinity of every thread of process pid to cpu
// (taskset -a, util-linux); the threads it starts later inherit it.
func pinPID(pid, cpu int) (string, error) {
	out, err := exec.Command("taskset", "-a", "-c", "-p", strconv.Itoa(cpu), strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("bench: pin pid %d to CPU %d: taskset: %w: %s", pid, cpu, err, bytes.TrimSpace(out))
	}
	return string(bytes.TrimSpace(out)), nil
}

// DefaultIsolationConfig is what `make bench` runs: 3,000 entries of 200
// words, 8 searchers, 10 s per phase.
func DefaultIsolationConfig() IsolationConfig {
	return IsolationConfig{Entries: 3_000, Words: 200, Savers: 16, Searchers: 8, Duration: 10 * time.Second, Warmup: time.Second, Timeout: 30 * time.Second}
}

// Validate reports the first invalid field, by name.
func (c IsolationConfig) Validate() error {
	switch {
	case c.Entries < 1 || c.Words < 1:
		return errors.New("bench: isolation entries and words must be >= 1")
	case c.Savers < 1 || c.Searchers < 1:
		return errors.New("bench: isolation savers and searchers must be >= 1")
	case c.Duration <= 0 || c.Warmup < 0 || c.Timeout <= 0:
		return errors.New("bench: isolation duration and timeout must be > 0, warmup >= 0")
	}
	return nil
}

// QuietStats is what the quiet user saw in one phase. Every request is
// in its histogram, failed ones included (a 503 after 10 s is a 10 s
// wait for the user), and failures are also counted.
type QuietStats struct {
	Agents, Chat             Histogram // GET /v1/agents; POST /v1/chat/completions
	AgentsFailed, ChatFailed int
	FirstErr                 error
	// Searches and SearchesFailed count the noisy user's memory searches
	// that ended in the phase (0 when alone).
	Searches, SearchesFailed int64
	SearchErr                error
}

// Isolation is one gatehouse's noisy-neighbour case.
type Isolation struct {
	Name     string
	Baseline bool // built from Config.Vs: reported, not judged
	Saved    int
	SaveTime time.Duration
	Alone    *QuietStats // the noisy user idle, its entries stored
	Noisy    *QuietStats // the noisy user searching
	Failed   error       // set when a step failed outright

	addr string
	keys map[string]string
}

// PrepareIsolation provisions the two users on the gateway at addr (an
// agent each, bound API keys) and saves the noisy user's memory entries
// concurrently.
func PrepareIsolation(ctx context.Context, name, addr string, keys map[string]string, cfg IsolationConfig) (*Isolation, error) {
	iso := &Isolation{Name: name, addr: addr, keys: keys}
	c := newGWClient(addr, keys[noisyUser], noisyUser, cfg.Savers, cfg.Timeout)
	defer c.close()
	t0 := time.Now()
	var next, saved atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range cfg.Savers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(cfg.Entries) && ctx.Err() == nil; i = next.Add(1) - 1 {
				body := map[string]any{"content": MemoryText(i, cfg.Words), "agent_id": noisyUser, "tags": []string{"bench"}}
				if err := c.do(ctx, "POST", "/v1/memory", body, 201, nil); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				saved.Add(1)
			}
		})
	}
	wg.Wait()
	iso.Saved, iso.SaveTime = int(saved.Load()), time.Since(t0)
	if firstErr != nil {
		return iso, fmt.Errorf("save memory in %s: %w", name, firstErr)
	}
	return iso, ctx.Err()
}

// RunPhase measures the quiet user for cfg.Duration, with the noisy user
// searching its memory from cfg.Searchers connections when noisy (they
// start cfg.Warmup earlier). It waits for the requests in flight at the
// end, so a stuck one is counted, not dropped.
func (iso *Isolation) RunPhase(ctx context.Context, noisy bool, cfg IsolationConfig) *QuietStats {
	st := &QuietStats{}
	q := iso.newQuiet(ctx, cfg) // its connections open before the noise starts
	defer q.c.close()
	stop := make(chan struct{})
	var searchers sync.WaitGroup
	if noisy {
		c := newGWClient(iso.addr, iso.keys[noisyUser], noisyUser, cfg.Searchers, cfg.Timeout)
		defer c.close()
		var ok, failed atomic.Int64
		var once sync.Once
		for s := range cfg.Searchers {
			searchers.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(s), 20))
				for first := true; ; first = false { // at least one search each
					select {
					case <-stop:
						if !first {
							return
						}
					default:
					}
					query := url.Values{"q": {searchQuery(rng)}, "agent_id": {noisyUser}, "limit": {"10"}}
					if err := c.do(ctx, "GET", "/v1/memory?"+query.Encode(), nil, 200, nil); err != nil {
						failed.Add(1)
						once.Do(func() { st.SearchErr = err })
						if ctx.Err() != nil {
							return
						}
						continue
					}
					ok.Add(1)
				}
			})
		}
		defer func() {
			close(stop)
			searchers.Wait()
			st.Searches, st.SearchesFailed = ok.Load(), failed.Load()
		}()
		sleepCtx(ctx, cfg.Warmup)
	} else {
		defer close(stop)
	}
	q.run(ctx, st, cfg.Duration)
	return st
}

// quiet is the quiet user's two calls, on a client of its own.
type quiet struct {
	c            *gwClient
	agents, chat func() error
}

// newQuiet returns the quiet user's calls after one unmeasured call of
// each (two at once, so that both connections are open).
func (iso *Isolation) newQuiet(ctx context.Context, cfg IsolationConfig) *quiet {
	c := newGWClient(iso.addr, iso.keys[quietUser], quietUser, 2, cfg.Timeout)
	q := &quiet{c: c,
		agents: func() error { return c.do(ctx, "GET", "/v1/agents", nil, 200, nil) },
		chat: func() error {
			return c.do(ctx, "POST", "/v1/chat/completions", chatBody(quietUser, "what is on my list today?"), 200, nil)
		},
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = q.agents() })
	wg.Go(func() { _ = q.chat() })
	wg.Wait()
	return q
}

// run runs the quiet user's two loops, one GET /v1/agents at a time and
// one chat at a time, for d.
func (q *quiet) run(ctx context.Context, st *QuietStats, d time.Duration) {
	var mu sync.Mutex
	fail := func(n *int, err error) {
		mu.Lock()
		defer mu.Unlock()
		*n++
		if st.FirstErr == nil {
			st.FirstErr = err
		}
	}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	loop := func(h *Histogram, failed *int, call func() error) {
		defer wg.Done()
		for { // at least one request, however long it takes
			t0 := time.Now()
			err := call()
			h.Record(time.Since(t0))
			if err != nil {
				fail(failed, err)
			}
			if time.Now().After(end) || ctx.Err() != nil {
				return
			}
		}
	}
	wg.Add(2)
	go loop(&st.Agents, &st.AgentsFailed, q.agents)
	go loop(&st.Chat, &st.ChatFailed, q.chat)
	wg.Wait()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// vocabulary is the words memory entries and searches are drawn from: a
// few hundred common English words, then made-up ones, 2,000 in all, so
// that a search matches some entries strongly and many a little, as in
// real notes.
var vocabulary = func() []string {
	common := strings.Fields(`the a of and to in is you that it he was for on are as with his they I at be this have
	from or one had by word but not what all were we when your can said there use an each which she do how their if
	will up other about out many then them these so some her would make like him into time has look two more write go
	see number no way could people my than first water been call who oil its now find long down day did get come made
	may part over new sound take only little work know place year live me back give most very after thing our just name
	good sentence man think say great where help through much before line right too mean old any same tell boy follow
	came want show also around form three small set put end does another well large must big even such because turn
	here why ask went men read need land different home us move try kind hand picture again change off play spell air
	away animal house point page letter mother answer found study still learn should America world meeting project
	budget invoice customer release deploy server backup schedule report draft review travel flight hotel dinner doctor
	dentist garden recipe birthday gift account password contract deadline invoice payment sprint roadmap ticket`)
	consonants, vowels := "bcdfghklmnprstvz", "aeiou"
	words := common
	for i := 0; len(words) < 2_000; i++ {
		w := make([]byte, 0, 6)
		for n := i; ; n /= len(consonants) * len(vowels) {
			w = append(w, consonants[n%len(consonants)], vowels[(n/len(consonants))%len(vowels)])
			if n < len(consonants)*len(vowels) {
				break
			}
		}
		words = append(words, string(w)+"en")
	}
	return words
}()

// MemoryText is memory entry i of words words: a deterministic draw from
// the vocabulary, Zipf-distributed as words in text are.
func MemoryText(i int64, words int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	z := rand.NewZipf(rng, 1.1, 2, uint64(len(vocabulary)-1))
	var b strings.Builder
	for w := range words {
		if w > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocabulary[z.Uint64()])
	}
	return b.String()
}

// searchQuery is three words drawn uniformly from the vocabulary.
func searchQuery(rng *rand.Rand) string {
	return vocabulary[rng.IntN(len(vocabulary))] + " " + vocabulary[rng.IntN(len(vocabulary))] + " " + vocabulary[rng.IntN(len(vocabulary))]
}
