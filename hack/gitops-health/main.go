// Command warmgate-health prints what three GitOps health readers say about Kubernetes
// objects, each through the reader's own library where it builds here:
//
//   - kstatus: sigs.k8s.io/cli-utils pkg/kstatus/status.Compute, what kpt and Flux's
//     kustomize-controller (for kinds without health expressions) use;
//   - Flux: the Kustomization's spec.healthCheckExprs entry for the object's apiVersion and
//     kind, read by github.com/fluxcd/pkg/runtime/cel (NewStatusReader over StatusEvaluator),
//     the code the kustomize-controller runs (cel-go underneath): an expression that fails to
//     evaluate reads Unknown, with the error;
//   - Argo CD: a resource.customizations.health Lua script, run by github.com/yuin/gopher-lua
//     (the Lua VM Argo CD uses) in a VM set up as Argo CD's util/lua sets one up for a script
//     from argocd-cm without useOpenLibs: the package, base and table libraries only, the
//     object as the global `obj` (decoded as Argo CD decodes it), one second to run, and the
//     returned table's status checked against Argo CD's health codes. Argo CD's own module
//     does not build here; its safe `os` library is left out (a script that uses it fails).
//
// Usage:
//
//	warmgate-health --flux EXPRS.yaml --argo HEALTH.lua OBJECT.yaml...
//
// EXPRS.yaml is a list of Flux healthCheckExprs entries (apiVersion, kind, current, failed,
// inProgress). Prints one JSON line per object: {"file", "kstatus", "flux", "argo"}, each
// reading {"status", "message", "error"} (the fields it has).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	fluxkustomize "github.com/fluxcd/pkg/apis/kustomize"
	fluxcel "github.com/fluxcd/pkg/runtime/cel"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"
)

// Reading is one reader's verdict on one object.
type Reading struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Line is the output for one object.
type Line struct {
	File    string  `json:"file"`
	KStatus Reading `json:"kstatus"`
	Flux    Reading `json:"flux"`
	Argo    Reading `json:"argo"`
}

func main() {
	fluxFile := flag.String("flux", "", "a YAML list of Flux healthCheckExprs entries")
	argoFile := flag.String("argo", "", "an Argo CD health.lua")
	flag.Parse()
	if *fluxFile == "" || *argoFile == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: warmgate-health --flux EXPRS.yaml --argo HEALTH.lua OBJECT.yaml...")
		os.Exit(2)
	}
	var exprs []fluxkustomize.CustomHealthCheck
	if err := readYAML(*fluxFile, &exprs); err != nil {
		fail(err)
	}
	script, err := os.ReadFile(*argoFile)
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	for _, file := range flag.Args() {
		u := &unstructured.Unstructured{}
		if err := readYAML(file, &u.Object); err != nil {
			fail(err)
		}
		line := Line{File: file, KStatus: kstatus(u), Flux: flux(exprs, u), Argo: argo(string(script), u)}
		if err := out.Encode(line); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "warmgate-health:", err)
	os.Exit(1)
}

// readYAML decodes YAML through JSON into v; for an object, through the decoder unstructured
// objects use, so that integers are int64 as a client reading the API server has them.
func readYAML(file string, v any) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	asJSON, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if obj, ok := v.(*map[string]any); ok {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(asJSON); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		*obj = u.Object
		return nil
	}
	return json.Unmarshal(asJSON, v)
}

func kstatus(u *unstructured.Unstructured) Reading {
	res, err := status.Compute(u)
	if err != nil {
		return Reading{Error: err.Error()}
	}
	return Reading{Status: res.Status.String(), Message: res.Message}
}

// flux reads the object as Flux's kustomize-controller does with a Kustomization's
// spec.healthCheckExprs: Flux's CEL status reader built from the whole list (it picks the entry
// by group and kind), whose evaluation error becomes the Unknown status the poller sees.
func flux(exprs []fluxkustomize.CustomHealthCheck, u *unstructured.Unstructured) Reading {
	ctx := context.Background()
	newReader, err := fluxcel.NewStatusReader(exprs)
	if err != nil {
		return Reading{Error: err.Error()}
	}
	res, err := newReader(nil).ReadStatusForObject(ctx, nil, u)
	if err != nil {
		return Reading{Error: err.Error()}
	}
	read := Reading{Status: res.Status.String(), Message: res.Message}
	if res.Error != nil {
		read.Error = res.Error.Error()
	}
	return read
}

// Argo CD's health status codes (gitops-engine pkg/health).
var argoCodes = map[string]bool{
	"Unknown": true, "Progressing": true, "Suspended": true, "Healthy": true, "Degraded": true, "Missing": true,
}

func argo(script string, u *unstructured.Unstructured) Reading {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return Reading{Error: err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", decodeValue(l, u.Object))
	if err := l.DoString(script); err != nil {
		return Reading{Error: err.Error()}
	}
	returned := l.Get(-1)
	table, ok := returned.(*lua.LTable)
	if !ok {
		return Reading{Error: "expect table output from Lua script, not " + returned.Type().String()}
	}
	code := lua.LVAsString(table.RawGetString("status"))
	if !argoCodes[code] {
		return Reading{Status: "Unknown", Message: "Lua returned an invalid health status"}
	}
	return Reading{Status: code, Message: lua.LVAsString(table.RawGetString("message"))}
}

// decodeValue turns an object into Lua values as Argo CD's util/lua does.
func decodeValue(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		arr := l.CreateTable(len(v), 0)
		for _, item := range v {
			arr.Append(decodeValue(l, item))
		}
		return arr
	case map[string]any:
		tbl := l.CreateTable(0, len(v))
		for key, item := range v {
			tbl.RawSetH(lua.LString(key), decodeValue(l, item))
		}
		return tbl
	}
	return lua.LNil
}
