// etcd-mutex: Go's clientv3/concurrency Mutex driven by the workload dlbench runs: N clients,
// each with its own clientv3.Client (own gRPC connection) and its own concurrency.Session
// (own lease), as N application processes would; each picks a key uniformly from -keys
// keys (1 = hot key), Lock then Unlock at once, for -warmup + -seconds. Prints one JSON line:
// acquisitions completed in the measured window, acquire latency percentiles of the
// operations that started in it.
//
// -mode rpc sends the RPCs of an uncontended lock cycle and nothing else: each client on its
// own keys, Mutex.Lock's claim transaction then Unlock's delete, so it can be set beside
// the same RPCs sent through etcd-client (dlbench-etcd's etcd_paths example).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	"go.etcd.io/etcd/version"
)

type result struct {
	count, errors int
	lat           []float64
}

func main() {
	endpoints := flag.String("endpoints", "", "host:port[,host:port...]")
	clients := flag.Int("clients", 8, "concurrent clients")
	keys := flag.Int("keys", 1, "keys, chosen uniformly")
	seconds := flag.Float64("seconds", 5, "measured seconds")
	warmup := flag.Float64("warmup", 1, "warm-up seconds")
	prefix := flag.String("prefix", "peer", "key prefix")
	seed := flag.Int64("seed", 1, "key choice seed")
	mode := flag.String("mode", "mutex", "mutex (concurrency.Mutex) or rpc (its RPCs, no contention)")
	flag.Parse()
	if *endpoints == "" {
		fmt.Fprintln(os.Stderr, "etcd-mutex: -endpoints is required")
		os.Exit(2)
	}
	if *mode != "mutex" && *mode != "rpc" {
		fmt.Fprintln(os.Stderr, "etcd-mutex: -mode is mutex or rpc")
		os.Exit(2)
	}
	eps := strings.Split(*endpoints, ",")
	type conn struct {
		cli *clientv3.Client
		s   *concurrency.Session
	}
	conns := make([]conn, *clients)
	for i := range conns {
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second})
		if err != nil {
			fail(err)
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		if err != nil {
			fail(err)
		}
		conns[i] = conn{cli, s}
	}
	start := time.Now()
	begin := start.Add(time.Duration(*warmup * float64(time.Second)))
	end := begin.Add(time.Duration(*seconds * float64(time.Second)))
	results := make([]result, *clients)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(*seed*1000003 + int64(i)))
			r := &results[i]
			for {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				var unlock func() error
				if *mode == "rpc" {
					// Mutex.Lock's transaction and Unlock's delete, on this client's own keys.
					pfx := fmt.Sprintf("/%s-rpc-%d-%d/", *prefix, i, rng.Intn(*keys))
					myKey := fmt.Sprintf("%s%x", pfx, conns[i].s.Lease())
					cli := conns[i].cli
					cmp := clientv3.Compare(clientv3.CreateRevision(myKey), "=", 0)
					put := clientv3.OpPut(myKey, "", clientv3.WithLease(conns[i].s.Lease()))
					get := clientv3.OpGet(myKey)
					getOwner := clientv3.OpGet(pfx, clientv3.WithFirstCreate()...)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_, err := cli.Txn(ctx).If(cmp).Then(put, getOwner).Else(get, getOwner).Commit()
					cancel()
					if err != nil {
						r.errors++
						continue
					}
					unlock = func() error { _, err := cli.Delete(context.Background(), myKey); return err }
				} else {
					key := fmt.Sprintf("/%s-%d", *prefix, rng.Intn(*keys))
					m := concurrency.NewMutex(conns[i].s, key)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					err := m.Lock(ctx)
					cancel()
					if err != nil {
						r.errors++
						continue
					}
					unlock = func() error { return m.Unlock(context.Background()) }
				}
				t1 := time.Now()
				if err := unlock(); err != nil {
					r.errors++
				}
				if !t1.Before(begin) && !t1.After(end) {
					r.count++
					if !t0.Before(begin) {
						r.lat = append(r.lat, float64(t1.Sub(t0).Nanoseconds())/1e3)
					}
				}
			}
		}(i)
	}
	wg.Wait()
	for _, c := range conns {
		c.s.Close()
		c.cli.Close()
	}
	total, errors := 0, 0
	var lat []float64
	for _, r := range results {
		total += r.count
		errors += r.errors
		lat = append(lat, r.lat...)
	}
	sort.Float64s(lat)
	out := map[string]interface{}{
		"client":       "Go clientv3/concurrency Mutex (etcd " + version.Version + ")",
		"mode":         *mode,
		"clients":      *clients,
		"keys":         *keys,
		"acquisitions": total,
		"seconds":      *seconds,
		"per_sec":      float64(total) / *seconds,
		"errors":       errors,
		"p50_us":       pct(lat, 0.5),
		"p99_us":       pct(lat, 0.99),
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}

func pct(v []float64, q float64) interface{} {
	if len(v) == 0 {
		return nil
	}
	i := int(q * float64(len(v)))
	if i >= len(v) {
		i = len(v) - 1
	}
	return v[i]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "etcd-mutex:", err)
	os.Exit(1)
}
