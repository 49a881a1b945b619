package main

import (
	"net/netip"
	"os"
	"os/signal"
	"syscall"
)

func signalNotify(c chan os.Signal) { signal.Notify(c, syscall.SIGTERM, syscall.SIGINT) }

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
