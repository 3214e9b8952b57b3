// Command kube is a multi-call binary holding kube-apiserver, kube-controller-manager,
// kube-scheduler and kubectl from the real Kubernetes sources. It picks the component by the
// name it was invoked as (argv[0]), the way busybox does; linking one binary is much
// faster than linking three. Test and lab infrastructure only; never shipped.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kubectl "k8s.io/kubectl/pkg/cmd"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if name == "kube" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	var cmd *cobra.Command
	switch name {
	case "kube-apiserver":
		cmd = apiserver.NewAPIServerCommand()
	case "kube-controller-manager":
		cmd = controllermanager.NewControllerManagerCommand()
	case "kube-scheduler":
		cmd = scheduler.NewSchedulerCommand()
	case "kubectl":
		cmd = kubectl.NewDefaultKubectlCommand()
	default:
		fmt.Fprintf(os.Stderr, "kube: unknown component %q (invoke as kube-apiserver, kube-controller-manager, kube-scheduler or kubectl)\n", name)
		os.Exit(2)
	}
	cmd.SetArgs(args)
	os.Exit(cli.Run(cmd))
}
