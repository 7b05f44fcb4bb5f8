# Sourced by .ci/run (bash): Docker for the container world, started so that it adds nothing to
# the root network namespace, and stopped only if started here. Tested with fake dockerd/docker
# binaries in tests/sim/tooling/ci-docker.spec.ts.
#
# start_docker: installs Debian's docker.io and debootstrap (the offline base image, ci/base/)
#   when missing (as root); if no Docker daemon answers, starts
#   `dockerd --bridge=none --iptables=false --ip6tables=false --ip-forward=false` (no bridge, no
#   rule, no forwarding), waits for `docker info` (DOCKERD_WAIT_S, default 60 s), and checks with
#   `ip -br link` that no link appeared in the root network namespace (else stops it). Exports
#   AMBIENT_LAB_DOCKER: `available`, or `unavailable: <reason>`; sets dockerd_pid when it started one.
# stop_dockerd: stops the dockerd start_docker started (SIGTERM, then SIGKILL after 30 s), by pid.

docker_unavailable() {
  export AMBIENT_LAB_DOCKER="unavailable: $*"
  echo "ci: docker: $*; the container tests will be skipped"
}

dockerd_pid=""
stop_dockerd() {
  [ -n "$dockerd_pid" ] || return 0
  kill -TERM "$dockerd_pid" 2>/dev/null
  for _ in $(seq 30); do
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 1
  done
  if kill -0 "$dockerd_pid" 2>/dev/null; then
    echo "ci: dockerd (pid $dockerd_pid) did not stop on SIGTERM in 30 s; SIGKILL"
    kill -KILL "$dockerd_pid"
  fi
  echo "ci: stopped dockerd (pid $dockerd_pid)"
  dockerd_pid=""
}

start_docker() {
  export AMBIENT_LAB_DOCKER=available
  if [ "$(id -u)" != 0 ]; then
    docker info >/dev/null 2>&1 \
      || docker_unavailable "not root: cannot install docker.io or start dockerd, and no Docker daemon answers"
    return 0
  fi
  local docker_pkgs=()
  command -v dockerd >/dev/null 2>&1 || docker_pkgs+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || docker_pkgs+=(debootstrap)
  if [ "${#docker_pkgs[@]}" -gt 0 ]; then
    echo "ci: installing Debian packages: ${docker_pkgs[*]}"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${docker_pkgs[@]}" >/dev/null; }; then
      docker_unavailable "apt-get install ${docker_pkgs[*]} failed"
      return 0
    fi
  fi
  docker info >/dev/null 2>&1 && return 0
  local links_before links_after dockerd_log
  links_before=$(ip -br link | awk '{print $1}' | sort)
  dockerd_log=$(mktemp -t ambient-lab-dockerd.XXXXXX.log)
  dockerd --bridge=none --iptables=false --ip6tables=false --ip-forward=false >"$dockerd_log" 2>&1 &
  dockerd_pid=$!
  echo "ci: started dockerd (pid $dockerd_pid, log $dockerd_log)"
  for _ in $(seq "${DOCKERD_WAIT_S:-60}"); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    docker_unavailable "dockerd did not answer within ${DOCKERD_WAIT_S:-60} s: $(tail -n 3 "$dockerd_log" | tr '\n' ' ')"
    stop_dockerd
    return 0
  fi
  links_after=$(ip -br link | awk '{print $1}' | sort)
  if [ "$links_before" != "$links_after" ]; then
    docker_unavailable "dockerd added links to the root network namespace: $(comm -13 <(echo "$links_before") <(echo "$links_after") | tr '\n' ' ')"
    stop_dockerd
  fi
}
