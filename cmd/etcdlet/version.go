package main

import (
	"fmt"
	"runtime"

	etcdversion "go.etcd.io/etcd/api/v3/version"

	"github.com/spf13/cobra"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print etcdlet's version and the etcd version it embeds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "etcdlet %s (etcd %s, %s %s/%s)\n", version, etcdversion.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
