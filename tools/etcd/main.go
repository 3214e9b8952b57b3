// Command etcd is the real etcd server (go.etcd.io/etcd/server/v3), built through a
// wrapper module because `go install` refuses etcd's own main module (it has replace
// lines). Test and lab infrastructure only; never shipped.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
