// Command nsbridge forwards TCP connections from the host's loopback into a network namespace.
//
// The local cluster (control plane, real node, pods) lives in a network namespace of its own, so
// that its bridge, veths, iptables rules and pod traffic never touch the machine's interfaces.
// The user's kubectl and pulumi still reach the API server on the host's 127.0.0.1: nsbridge
// listens there and, for each connection, dials the same kind of address inside the namespace
// (its own loopback), then copies bytes both ways. No route, NAT or interface joins the two
// namespaces; the one crossing is this process, which holds sockets in both.
//
//	nsbridge -netns /run/netns/kolotoc -forward 127.0.0.1:6443=127.0.0.1:6443 [-forward ...]
//
// It runs until SIGTERM or SIGINT.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// dialTimeout bounds a dial inside the namespace: the target is on the namespace's loopback, so
// anything slower means it is not listening (yet).
const dialTimeout = 5 * time.Second

// sysSetns is setns(2)'s number; the syscall package has no wrapper (x/sys would be this module's
// only dependency for one number).
var sysSetns = map[string]uintptr{"amd64": 308, "arm64": 268}[runtime.GOARCH]

type forwards []string

func (f *forwards) String() string     { return strings.Join(*f, ",") }
func (f *forwards) Set(v string) error { *f = append(*f, v); return nil }

type dialRequest struct {
	addr  string
	reply chan dialResult
}

type dialResult struct {
	conn net.Conn
	err  error
}

// nsDialer dials from inside a network namespace. A socket belongs to the namespace of the
// thread that created it, so one goroutine, locked to a thread that entered the namespace, makes
// every outgoing socket. The thread is never handed back to the runtime (it exits with the
// goroutine), so no other goroutine ever runs in the namespace by accident.
func nsDialer(path string) (chan<- dialRequest, error) {
	requests := make(chan dialRequest)
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(path)
		if err != nil {
			ready <- err
			return
		}
		_, _, errno := syscall.RawSyscall(sysSetns, f.Fd(), syscall.CLONE_NEWNET, 0)
		f.Close()
		if errno != 0 {
			ready <- fmt.Errorf("setns %s: %w", path, errno)
			return
		}
		ready <- nil
		for r := range requests {
			c, err := net.DialTimeout("tcp", r.addr, dialTimeout)
			r.reply <- dialResult{c, err}
		}
	}()
	return requests, <-ready
}

func main() {
	var fw forwards
	netns := flag.String("netns", "", "path of the network namespace to dial into (e.g. /run/netns/kolotoc)")
	flag.Var(&fw, "forward", "LISTEN=TARGET: listen on LISTEN on the host, dial TARGET in the namespace (repeatable)")
	flag.Parse()
	log.SetPrefix("[nsbridge] ")
	log.SetFlags(log.LstdFlags)
	if *netns == "" || len(fw) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if sysSetns == 0 {
		log.Fatalf("setns: unknown syscall number on %s", runtime.GOARCH)
	}
	dial, err := nsDialer(*netns)
	if err != nil {
		log.Fatal(err)
	}
	var listeners []net.Listener
	for _, f := range fw {
		listen, target, ok := strings.Cut(f, "=")
		if !ok || !loopback(listen) || !loopback(target) {
			log.Fatalf("-forward %q: want LISTEN=TARGET, both loopback host:port (e.g. 127.0.0.1:6443=127.0.0.1:6443)", f)
		}
		l, err := net.Listen("tcp", listen)
		if err != nil {
			log.Fatal(err)
		}
		listeners = append(listeners, l)
		log.Printf("forwarding host %s to %s in %s", listen, target, *netns)
		go serve(l, target, dial)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	for _, l := range listeners {
		l.Close()
	}
}

// loopback reports whether addr is host:port on a loopback address: nsbridge never opens the
// cluster to anything but this machine's loopback, on either side.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func serve(l net.Listener, target string, dial chan<- dialRequest) {
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				log.Printf("accept on %s: %v", l.Addr(), err)
			}
			return
		}
		go func() {
			reply := make(chan dialResult, 1)
			dial <- dialRequest{target, reply}
			r := <-reply
			if r.err != nil {
				log.Printf("dial %s in the namespace: %v", target, r.err)
				c.Close()
				return
			}
			pipe(c, r.conn)
		}()
	}
}

// pipe copies both ways until both directions end, passing half-closes on.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}
