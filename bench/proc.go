package bench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Proc is a server process of the suite (the stub, the bare hop, nginx,
// gatehouse), each in its own process so that they compete for the two
// cores as they would in production, not inside one Go scheduler.
type Proc struct {
	Name  string
	cmd   *exec.Cmd
	log   *os.File
	lines chan string // output lines, until the first match in Start
	done  chan struct{}
}

// StartProc starts argv with env added to the suite's environment, sends
// its output to dir/name.log, and waits (up to timeout) for an output
// line for which match returns true, handing back match's string (an
// address, typically).
func StartProc(dir, name string, argv, env []string, timeout time.Duration, match func(line string) (string, bool)) (*Proc, string, error) {
	p, err := spawn(dir, name, argv, env)
	if err != nil {
		return nil, "", err
	}
	logf := p.log
	deadline := time.After(timeout)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return nil, "", fmt.Errorf("%s exited before it was ready; see %s", name, logf.Name())
			}
			if s, ok := match(line); ok {
				go func() { // the rest goes to the log only
					for range p.lines {
					}
				}()
				return p, s, nil
			}
		case <-deadline:
			p.Stop()
			return nil, "", fmt.Errorf("%s not ready after %v; see %s", name, timeout, logf.Name())
		}
	}
}

// StartProcPort starts argv as StartProc does, for a server that prints
// nothing once ready (HAProxy): it waits until addr accepts connections.
func StartProcPort(dir, name string, argv, env []string, timeout time.Duration, addr string) (*Proc, error) {
	p, err := spawn(dir, name, argv, env)
	if err != nil {
		return nil, err
	}
	go func() { // output goes to the log only
		for range p.lines {
		}
	}()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			p.Stop()
			return nil, fmt.Errorf("%s exited before it was ready; see %s", name, p.log.Name())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("%s not listening on %s after %v; see %s", name, addr, timeout, p.log.Name())
		}
	}
}

// spawn starts argv with env added to the suite's environment, its
// output copied to dir/name.log and, line by line, to p.lines.
func spawn(dir, name string, argv, env []string) (*Proc, error) {
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	p := &Proc{Name: name, cmd: exec.Command(argv[0], argv[1:]...), log: logf, lines: make(chan string, 64), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	// No orphan if the suite dies: SIGTERM, so that nginx's master takes
	// its workers down with it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); pw.Close(); close(p.done) }()
	go p.copyLines(pr)
	return p, nil
}

func (p *Proc) copyLines(r io.Reader) {
	defer close(p.lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintln(p.log, sc.Text())
		p.lines <- sc.Text()
	}
	_, _ = io.Copy(p.log, r)
}

// Stop sends SIGTERM, waits up to 10 s, then kills. It is safe to call twice.
func (p *Proc) Stop() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	p.log.Close()
}

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// CPU returns the CPU time (user + system) used so far by the process and
// its live children (nginx's workers), read from /proc; 0 elsewhere.
func (p *Proc) CPU() time.Duration {
	total := procCPU(p.PID())
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == p.PID() {
			continue
		}
		if ppid, _ := procStat(pid); ppid == p.PID() {
			total += procCPU(pid)
		}
	}
	return total
}

// clockTick is USER_HZ, 100 on every Linux the suite targets.
const clockTick = 10 * time.Millisecond

func procCPU(pid int) time.Duration {
	_, fields := procStat(pid)
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * clockTick
}

// procStat returns the parent pid and the fields of /proc/pid/stat after
// the command name (fields[0] is the state).
func procStat(pid int) (int, []string) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, nil
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0, nil
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid, fields
}

// freePort returns a loopback address that was free a moment ago, for
// servers (nginx) that cannot report the port they picked.
func freePort() (string, error) {
	ln, err := listenLoopback()
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

var errNoNginx = errors.New("bench: nginx not found (make bench-deps installs it)")
