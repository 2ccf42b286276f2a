# Installs what sender-indexer's scripts need, only when missing; SOURCED by
# scripts/test.sh and scripts/demo.sh from the repository root (it exports
# PATH with the pinned tools first). Works on a fresh Debian machine, as root
# or not (non-root uses sudo for apt-get). Idempotent, and quick when
# everything is present. It must not start any service or touch a database.
#
#   - PostgreSQL server binaries (Debian `postgresql`), only if no initdb is
#     found. Its service is NOT started: the tests and the demo run their own
#     cluster. As root they also need the `postgres` system user, which that
#     package creates.
#   - make and a C compiler (Debian `make gcc`), only if missing: the
#     binary's allocator (tikv-jemallocator) builds jemalloc from C.
#   - node/npm (Debian `nodejs npm`), to fetch the pinned tools.
#   - anvil + cast, pinned exactly in tools/package.json and
#     tools/package-lock.json, installed into .tools/ (gitignored).

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    log "need root for: $*"
    exit 1
  fi
}

apt_updated=
apt_install() {
  if [ -z "$apt_updated" ]; then
    as_root apt-get update -qq
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# --- PostgreSQL server binaries -------------------------------------------
have_initdb() {
  command -v initdb >/dev/null 2>&1 && return 0
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    return 0
  fi
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}
need_pg=
have_initdb || need_pg=1
if [ "$(id -u)" -eq 0 ] && ! getent passwd postgres >/dev/null; then
  need_pg=1 # the server cannot run as root; the package creates `postgres`
fi
if [ -n "$need_pg" ]; then
  log "installing postgresql (binaries only; its service stays stopped)"
  # policy-rc.d exiting 101 tells invoke-rc.d "do not start services".
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
    as_root chmod 755 "$policy"
    trap 'as_root rm -f "$policy"' EXIT
    apt_install postgresql
    as_root rm -f "$policy"
    trap - EXIT
  else
    apt_install postgresql
  fi
fi

# --- make and cc, for jemalloc's C build ------------------------------------
c_tools=()
command -v make >/dev/null 2>&1 || c_tools+=(make)
command -v cc >/dev/null 2>&1 || c_tools+=(gcc libc6-dev)
if [ "${#c_tools[@]}" -gt 0 ]; then
  log "installing ${c_tools[*]} (jemalloc builds from C)"
  apt_install "${c_tools[@]}"
fi

# --- anvil and cast (pinned, from npm) -------------------------------------
if ! command -v npm >/dev/null 2>&1; then
  log "installing nodejs and npm"
  apt_install nodejs npm
fi
case "$(uname -m)" in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) log "unsupported cpu $(uname -m) for @foundry-rs binaries"; exit 1 ;;
esac
tools=.tools
pin() { node -p "require('./tools/package.json').dependencies['@foundry-rs/$1']"; }
native() { echo "$tools/node_modules/@foundry-rs/$1-linux-$arch/bin/$1"; }
tools_ok() {
  local t
  for t in anvil cast; do
    "$(native "$t")" --version 2>/dev/null | grep -q "Version: $(pin "$t")" || return 1
  done
}
if ! tools_ok; then
  log "installing pinned anvil $(pin anvil) and cast $(pin cast) into $tools/"
  mkdir -p "$tools"
  cp tools/package.json tools/package-lock.json "$tools/"
  (cd "$tools" && npm ci --no-audit --no-fund --loglevel=error)
  # npm sometimes skips optional per-platform packages (npm/cli#4828): add
  # the one for this machine explicitly if it did not land.
  for t in anvil cast; do
    if [ ! -x "$(native "$t")" ]; then
      (cd "$tools" && npm install --no-save --no-audit --no-fund --loglevel=error \
        "@foundry-rs/$t-linux-$arch@$(pin "$t")")
    fi
  done
  tools_ok || { log "anvil/cast in $tools/ do not run"; exit 1; }
fi
export PATH="$PWD/$tools/node_modules/.bin:$PATH"

