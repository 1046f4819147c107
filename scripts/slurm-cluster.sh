#!/usr/bin/env bash
# A single-host Slurm cluster for asynctorchx tests: 4 virtual nodes on 127.0.0.1, no systemd,
# with accounting (slurmdbd and MariaDB) as production clusters run it.
#
#   bash scripts/slurm-cluster.sh start                  # install (if needed), configure, start
#   bash scripts/slurm-cluster.sh start --no-accounting  # the same without slurmdbd and MariaDB
#   bash scripts/slurm-cluster.sh status   # exit 0 when slurmctld answers and the 4 nodes are up
#   bash scripts/slurm-cluster.sh stop     # cancel jobs, stop the daemons this script started
#   bash scripts/slurm-cluster.sh restart slurmctld [--down SECONDS]
#       # stop the controller, keep it down SECONDS (default 0), start it with its state (jobs
#       # keep running on the nodes), return once it answers
#
# `start` as root: installs Debian's munge, slurmctld, slurmd and slurm-client (and, with
# accounting, slurmdbd and mariadb-server) with apt-get when a binary is missing (apt-get
# update only when the plain install fails), writes /etc/slurm/slurm.conf and slurmdbd.conf
# (refusing to overwrite files this script did not write), then starts, in the background
# and each with a pid file under $STATE:
#   - munged on its own socket and key under $STATE/munge (the system's munged is not used),
#   - with accounting: mariadbd on its own data directory, socket and port ($STATE/mysql,
#     127.0.0.1:$DB_PORT; the system's MariaDB is not used) holding the slurm_acct_db
#     database, and slurmdbd on 127.0.0.1:$DBD_PORT,
#   - slurmctld (SlurmUser=root, state in $STATE/ctld),
#   - one slurmd per node: `slurmd -N n1` ... `slurmd -N n4` (Debian builds Slurm with
#     multiple-slurmd support), each on its own port with its own spool directory.
# It then waits at most $WAIT_S seconds for `sinfo` to show the 4 nodes idle and prints the
# time taken. Logs are in $STATE/log. Jobs run as root or as any local user (with accounting,
# a user with an association: root has one).
# `start` on a cluster that is up in the other configuration restarts slurmctld (and starts
# or stops slurmdbd and MariaDB): running jobs survive it.
# See docs/slurm-cluster.md for the measured start times, memory and known behaviour.
set -euo pipefail

STATE="/var/lib/asynctorchx-slurm"
CONF_DIR="/etc/slurm"
CONF="$CONF_DIR/slurm.conf"
DBD_CONF="$CONF_DIR/slurmdbd.conf"
MARK="# written by asynctorchx scripts/slurm-cluster.sh"
LOGDIR="$STATE/log"
MUNGE_DIR="$STATE/munge"
MUNGE_SOCKET="$MUNGE_DIR/munge.socket"
NODES=(n1 n2 n3 n4)
CTLD_PORT=6817
FIRST_NODE_PORT=6821
CPUS_PER_NODE=4
MEM_MB_PER_NODE=4096
WAIT_S=60
DB_DIR="$STATE/mysql"
DB_SOCKET="$DB_DIR/mysqld.sock" # in the directory mariadbd (user mysql) owns
DB_PORT=6830
DBD_PORT=6819
DB_NAME=slurm_acct_db
DB_USER=slurm
# With accounting a finished job leaves squeue some seconds after MinJobAge (slurmctld
# purges in batches): the tests see it through sacct afterwards. Not less than 10: sacct
# lists a heterogeneous job's components only about 4 s after its end. Without accounting
# nothing else remembers a job, so it stays for 300 s.
MIN_JOB_AGE_ACCOUNTING=10
MIN_JOB_AGE_NONE=300
ACCOUNTING=1

# shellcheck source=scripts/engine.sh
source "$(dirname "$0")/engine.sh"

install_packages() {
    local pkgs=()
    command -v munged >/dev/null 2>&1 || pkgs+=(munge)
    command -v slurmctld >/dev/null 2>&1 || pkgs+=(slurmctld)
    command -v slurmd >/dev/null 2>&1 || pkgs+=(slurmd)
    command -v sbatch >/dev/null 2>&1 || pkgs+=(slurm-client)
    if [ "$ACCOUNTING" = 1 ]; then
        command -v slurmdbd >/dev/null 2>&1 || pkgs+=(slurmdbd)
        command -v mariadbd >/dev/null 2>&1 || pkgs+=(mariadb-server)
    fi
    if [ "${#pkgs[@]}" -gt 0 ]; then
        need_root "install ${pkgs[*]}"
        local t0
        t0="$(now_ms)"
        apt_install "${pkgs[@]}"
        echo "packages installed in $(elapsed "$t0")"
    fi
    local bins=(munged slurmctld slurmd sbatch sinfo squeue scontrol)
    [ "$ACCOUNTING" = 1 ] && bins+=(slurmdbd sacct sacctmgr mariadbd mariadb-install-db mariadb)
    for bin in "${bins[@]}"; do
        command -v "$bin" >/dev/null 2>&1 || die "no $bin on PATH after installing Slurm"
    done
}

controller_up() {
    scontrol ping 2>/dev/null | grep -q 'is UP'
}

# Print how many of the 4 nodes are in one of the states given as a regex.
nodes_in_state() {
    sinfo -h -N -o '%N %T' 2>/dev/null | awk -v re="^($1)\$" '$2 ~ re { print $1 }' | sort -u | wc -l
}

nodes_up() {
    [ "$(nodes_in_state 'idle|mixed|allocated|completing|planned')" -eq "${#NODES[@]}" ]
}

write_munge_key() {
    mkdir -p "$MUNGE_DIR"
    chmod 0755 "$STATE" "$MUNGE_DIR"
    if [ ! -s "$MUNGE_DIR/munge.key" ]; then
        if command -v mungekey >/dev/null 2>&1; then
            mungekey --create --keyfile="$MUNGE_DIR/munge.key"
        else
            dd if=/dev/urandom of="$MUNGE_DIR/munge.key" bs=1024 count=1 status=none
        fi
    fi
    chmod 0600 "$MUNGE_DIR/munge.key"
}

# Print the slurm.conf of the configuration asked for.
render_config() {
    local host
    host="$(hostname -s)"
    {
        echo "$MARK; rewritten on every start"
        echo "ClusterName=asynctorchx"
        echo "SlurmctldHost=$host(127.0.0.1)"
        echo "SlurmctldPort=$CTLD_PORT"
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "AuthInfo=socket=$MUNGE_SOCKET"
        echo "StateSaveLocation=$STATE/ctld"
        echo "SlurmctldPidFile=$STATE/slurmctld.pid"
        echo "SlurmctldLogFile=$LOGDIR/slurmctld.log"
        echo "SlurmdSpoolDir=$STATE/spool/%n"
        echo "SlurmdPidFile=$STATE/slurmd.%n.pid"
        echo "SlurmdLogFile=$LOGDIR/slurmd.%n.log"
        echo "SlurmdParameters=config_overrides"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "SchedulerType=sched/backfill"
        echo "SchedulerParameters=bf_interval=1"
        echo "MailProg=/bin/true" # --mail-type/--mail-user are accepted; no mail is sent
        echo "MpiDefault=none"
        echo "SwitchType=switch/none"
        echo "ReturnToService=2"
        if [ "$ACCOUNTING" = 1 ]; then
            echo "AccountingStorageType=accounting_storage/slurmdbd"
            echo "AccountingStorageHost=127.0.0.1"
            echo "AccountingStoragePort=$DBD_PORT"
            # the munge socket of connections to slurmdbd (slurm.conf(5), AccountingStoragePass)
            echo "AccountingStoragePass=$MUNGE_SOCKET"
            # as production clusters: a job needs an association, a valid account and QOS,
            # refused at submission otherwise (root's association comes with the cluster)
            echo "AccountingStorageEnforce=associations,limits,qos"
        else
            echo "AccountingStorageType=accounting_storage/none"
        fi
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "JobCompType=jobcomp/none"
        echo "InactiveLimit=0"
        echo "KillWait=5"
        if [ "$ACCOUNTING" = 1 ]; then
            echo "MinJobAge=$MIN_JOB_AGE_ACCOUNTING"
        else
            echo "MinJobAge=$MIN_JOB_AGE_NONE"
        fi
        echo "SlurmctldTimeout=30"
        echo "SlurmdTimeout=60"
        local i port
        for i in "${!NODES[@]}"; do
            port=$((FIRST_NODE_PORT + i))
            echo "NodeName=${NODES[$i]} NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port" \
                "CPUs=$CPUS_PER_NODE Sockets=1 CoresPerSocket=$CPUS_PER_NODE ThreadsPerCore=1" \
                "RealMemory=$MEM_MB_PER_NODE State=UNKNOWN"
        done
        # a preemption pair over the same nodes (docs/slurm-cluster.md): a job of `high`
        # preempts those of `low` (requeued) and `lowcancel` (cancelled); `debug`'s never
        echo "PreemptType=preempt/partition_prio"
        echo "PreemptMode=REQUEUE"
        local IFS=,
        echo "PartitionName=debug Nodes=${NODES[*]} Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=OFF"
        echo "PartitionName=low Nodes=${NODES[*]} MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE"
        echo "PartitionName=lowcancel Nodes=${NODES[*]} MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=CANCEL"
        echo "PartitionName=high Nodes=${NODES[*]} MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF"
    }
}

write_config() {
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        die "$CONF exists and was not written by this script; move it away first"
    fi
    mkdir -p "$CONF_DIR" "$LOGDIR" "$STATE/ctld" "$STATE/spool"
    render_config >"$CONF.tmp"
    chmod 0644 "$CONF.tmp"
    CONF_CHANGED=0
    cmp -s "$CONF.tmp" "$CONF" || CONF_CHANGED=1
    mv "$CONF.tmp" "$CONF"
}

# The database password of slurmdbd, made once and kept in $STATE (0600).
db_password() {
    if [ ! -s "$STATE/slurmdbd.pass" ]; then
        (umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=\n' >"$STATE/slurmdbd.pass")
    fi
    cat "$STATE/slurmdbd.pass"
}

write_dbd_config() {
    if [ -f "$DBD_CONF" ] && ! grep -qF "$MARK" "$DBD_CONF"; then
        die "$DBD_CONF exists and was not written by this script; move it away first"
    fi
    local password
    password="$(db_password)"
    (
        umask 077 # slurmdbd refuses a slurmdbd.conf others can read: it holds the password
        {
            echo "$MARK; rewritten on every start"
            echo "AuthType=auth/munge"
            echo "AuthInfo=socket=$MUNGE_SOCKET"
            echo "DbdHost=$(hostname -s)"
            echo "DbdAddr=127.0.0.1"
            echo "DbdPort=$DBD_PORT"
            echo "SlurmUser=root"
            echo "PidFile=$STATE/slurmdbd.pid"
            echo "LogFile=$LOGDIR/slurmdbd.log"
            echo "StorageType=accounting_storage/mysql"
            echo "StorageHost=127.0.0.1"
            echo "StoragePort=$DB_PORT"
            echo "StorageUser=$DB_USER"
            echo "StoragePass=$password"
            echo "StorageLoc=$DB_NAME"
        } >"$DBD_CONF.tmp"
    )
    mv "$DBD_CONF.tmp" "$DBD_CONF"
}

db_answers() {
    mariadb-admin --no-defaults --socket="$DB_SOCKET" ping >/dev/null 2>&1
}

# mariadbd on its own data directory, socket and port, started directly (no systemd),
# running as the mysql user; then the slurm_acct_db database and its user.
start_database() {
    # a small InnoDB: test jobs need little (measured: 94 MB resident, a 25 MB data directory
    # instead of 113 MB with the default redo log)
    local sizes=(--innodb-log-file-size=8M --innodb-buffer-pool-size=16M
        --innodb-lock-wait-timeout=900) # slurmdbd's recommended value (it logs an error otherwise)
    if [ ! -d "$DB_DIR/mysql" ]; then
        local t0
        t0="$(now_ms)"
        rm -rf "$DB_DIR"
        mkdir -p "$DB_DIR"
        chown mysql:mysql "$DB_DIR"
        mariadb-install-db --no-defaults --user=mysql --datadir="$DB_DIR" --skip-test-db \
            --auth-root-authentication-method=socket "${sizes[@]}" \
            >>"$LOGDIR/mariadb-install.out" 2>&1 || {
            show_logs
            die "mariadb-install-db failed (log: $LOGDIR/mariadb-install.out)"
        }
        echo "database directory made in $(elapsed "$t0")"
    fi
    if ! pid_alive "$DB_DIR/mariadbd.pid"; then
        # setsid: the daemon outlives this script and holds none of its file descriptors
        setsid mariadbd --no-defaults --user=mysql --datadir="$DB_DIR" --socket="$DB_SOCKET" \
            --port="$DB_PORT" --bind-address=127.0.0.1 --pid-file="$DB_DIR/mariadbd.pid" \
            --log-error="$DB_DIR/mariadbd.log" "${sizes[@]}" \
            </dev/null >>"$LOGDIR/mariadbd.out" 2>&1 &
        local pid=$! i
        for ((i = 0; i < 300; i++)); do
            db_answers && break
            kill -0 "$pid" 2>/dev/null || break # it exited: its log says why
            sleep 0.1
        done
        db_answers || {
            show_logs
            die "mariadbd did not answer on $DB_SOCKET within 30 s"
        }
    fi
    local password
    password="$(db_password)"
    mariadb --no-defaults --socket="$DB_SOCKET" <<SQL
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$password';
ALTER USER '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$password';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'127.0.0.1';
SQL
}

dbd_answers() {
    sacctmgr -n -P list cluster format=cluster >/dev/null 2>&1
}

# slurmdbd (it daemonizes itself), then the cluster's record so slurmctld can register.
start_accounting() {
    start_database
    write_dbd_config
    if ! pid_alive "$STATE/slurmdbd.pid"; then
        start_detaching_daemon slurmdbd "$STATE/slurmdbd.pid" "$LOGDIR/slurmdbd.out" slurmdbd
    fi
    local deadline=$(($(now_ms) + 30000))
    until dbd_answers; do # sacctmgr itself waits up to 2 s for an answer
        [ "$(now_ms)" -lt "$deadline" ] || break
        sleep 0.1
    done
    dbd_answers || {
        show_logs
        die "slurmdbd did not answer sacctmgr within 30 s"
    }
    if ! sacctmgr -n -P list cluster format=cluster | grep -qx asynctorchx; then
        sacctmgr -i add cluster asynctorchx >/dev/null
    fi
}

# Start one daemon that detaches itself and writes its pid file, and check that it is still
# alive shortly after.
start_detaching_daemon() {
    local name="$1" pidfile="$2" log="$3"
    shift 3
    "$@" >>"$log" 2>&1 || {
        show_logs
        die "$name did not start (command: $*)"
    }
    local i
    for ((i = 0; i < 50; i++)); do
        pid_alive "$pidfile" && return 0
        sleep 0.1
    done
    show_logs
    die "$name wrote no live pid to $pidfile (command: $*)"
}

show_logs() {
    local f
    for f in "$LOGDIR"/*.log "$LOGDIR"/*.out "$DB_DIR/mariadbd.log"; do
        [ -s "$f" ] || continue
        echo "--- last lines of $f" >&2
        tail -n 15 "$f" >&2 || true
    done
}

# 1 when the slurm.conf in place configures accounting, else 0.
conf_accounting() {
    if grep -qx 'AccountingStorageType=accounting_storage/slurmdbd' "$CONF" 2>/dev/null; then
        echo 1
    else
        echo 0
    fi
}

start_cluster() {
    local t0
    t0="$(now_ms)"
    if controller_up && nodes_up && [ "$(render_config)" = "$(cat "$CONF" 2>/dev/null)" ] &&
        { [ "$ACCOUNTING" = 0 ] || dbd_answers; }; then
        echo "slurm cluster already up: $(sinfo -h -o '%P %D %T' | tr '\n' ' ')"
        return 0
    fi
    need_root "start munged, slurmctld and slurmd"
    write_munge_key
    write_config
    if ! pid_alive "$STATE/munged.pid"; then
        start_detaching_daemon munged "$STATE/munged.pid" "$LOGDIR/munged.out" \
            munged --socket="$MUNGE_SOCKET" --key-file="$MUNGE_DIR/munge.key" \
            --pid-file="$STATE/munged.pid" --log-file="$LOGDIR/munged.log" \
            --seed-file="$MUNGE_DIR/munge.seed" --force
    fi
    [ "$ACCOUNTING" = 1 ] && start_accounting
    local reconfigure=0
    if [ "$CONF_CHANGED" = 1 ] && pid_alive "$STATE/slurmctld.pid"; then
        # AccountingStorageType takes effect only at slurmctld's start; jobs and slurmd keep
        # running across the restart, and slurmd reread slurm.conf on `scontrol reconfigure`
        echo "slurm.conf changed: restarting slurmctld (running jobs are kept)"
        stop_pidfiles slurmctld "$STATE/slurmctld.pid"
        reconfigure=1
    fi
    if ! pid_alive "$STATE/slurmctld.pid"; then
        # -i: ignore unreadable state left by an earlier run instead of refusing to start.
        # -c: a controller started anew (not restarted for a slurm.conf change above) forgets
        # the jobs of an earlier run: their steps died with that run's slurmd, and a requeued
        # one was seen to hold two nodes in COMPLETING across the restart, so the next test
        # run's multi-node jobs could not start.
        local clear=(-c)
        [ "$reconfigure" = 1 ] && clear=()
        start_detaching_daemon slurmctld "$STATE/slurmctld.pid" "$LOGDIR/slurmctld.out" \
            slurmctld "${clear[@]}" -i
    fi
    if [ "$ACCOUNTING" = 0 ]; then
        stop_pidfiles slurmdbd "$STATE/slurmdbd.pid"
        stop_pidfiles mariadbd "$DB_DIR/mariadbd.pid"
    fi
    local node
    for node in "${NODES[@]}"; do
        mkdir -p "$STATE/spool/$node"
        if ! pid_alive "$STATE/slurmd.$node.pid"; then
            start_detaching_daemon "slurmd -N $node" "$STATE/slurmd.$node.pid" "$LOGDIR/slurmd.$node.out" \
                slurmd -N "$node"
        fi
    done
    local i
    for ((i = 0; i < WAIT_S * 4; i++)); do
        if [ "$reconfigure" = 1 ] && controller_up; then
            scontrol reconfigure
            reconfigure=0
        fi
        # up: idle, or running jobs that survived a restart of slurmctld
        if controller_up && nodes_up; then
            echo "slurm cluster up in $(elapsed "$t0"): $(sinfo -h -o '%P %D %T' | tr '\n' ' ')"
            return 0
        fi
        # nodes left down/drained by an earlier run come back with an explicit resume
        if ((i == 20)) && controller_up; then
            scontrol update NodeName="$(
                IFS=,
                echo "${NODES[*]}"
            )" State=RESUME >/dev/null 2>&1 || true
        fi
        sleep 0.25
    done
    sinfo -N >&2 || true
    show_logs
    die "the ${#NODES[@]} nodes were not up within ${WAIT_S} s"
}

# Send SIGTERM to the daemons named by the pid files given, wait (at most 10 s) for all of them
# to exit, then SIGKILL any left. Arguments: pairs of "name" "pidfile".
stop_pidfiles() {
    local names=() pids=() files=() i
    while [ "$#" -ge 2 ]; do
        if pid_alive "$2"; then
            names+=("$1")
            pids+=("$(cat "$2")")
            kill "$(cat "$2")" 2>/dev/null || true
        fi
        files+=("$2")
        shift 2
    done
    for ((i = 0; i < 100; i++)); do
        local left=0 pid
        for pid in "${pids[@]}"; do
            kill -0 "$pid" 2>/dev/null && left=1
        done
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    for i in "${!pids[@]}"; do
        if kill -0 "${pids[$i]}" 2>/dev/null; then
            echo "${names[$i]} (pid ${pids[$i]}) did not exit in 10 s; sending SIGKILL" >&2
            kill -9 "${pids[$i]}" 2>/dev/null || true
        else
            echo "${names[$i]} stopped"
        fi
    done
    rm -f "${files[@]}"
}

stop_cluster() {
    local i node
    if controller_up; then
        # running job steps belong to slurmstepd processes that outlive slurmd: cancel them first
        local jobs
        jobs="$(squeue -h -o '%i' -t PENDING,RUNNING,SUSPENDED,CONFIGURING 2>/dev/null || true)"
        if [ -n "$jobs" ]; then
            echo "cancelling jobs: $(echo "$jobs" | tr '\n' ' ')"
            # shellcheck disable=SC2086
            scancel $jobs || true
            for ((i = 0; i < 60; i++)); do
                [ -z "$(squeue -h -o '%i' -t PENDING,RUNNING,SUSPENDED,CONFIGURING,COMPLETING \
                    2>/dev/null)" ] && break
                sleep 0.25
            done
        fi
    fi
    local args=()
    for node in "${NODES[@]}"; do
        args+=("slurmd -N $node" "$STATE/slurmd.$node.pid")
    done
    stop_pidfiles "${args[@]}"
    # slurmctld saves its state (and records slurmdbd has not taken yet) on SIGTERM without
    # munge: stop them at once (each takes ~2 s); the database last, once slurmdbd is gone
    stop_pidfiles slurmctld "$STATE/slurmctld.pid" slurmdbd "$STATE/slurmdbd.pid" \
        munged "$STATE/munged.pid"
    stop_pidfiles mariadbd "$DB_DIR/mariadbd.pid"
}

case "${1:-}" in
start)
    case "${2:-}" in
    "") ;;
    --no-accounting) ACCOUNTING=0 ;;
    *)
        echo "usage: $0 start [--no-accounting]" >&2
        exit 2
        ;;
    esac
    t_start="$(now_ms)"
    install_packages
    start_cluster
    echo "start took $(elapsed "$t_start") in total"
    ;;
status)
    command -v sinfo >/dev/null 2>&1 || die "Slurm is not installed (run: bash $0 start)"
    controller_up || die "slurmctld does not answer (run: bash $0 start)"
    nodes_up || {
        sinfo -N >&2 || true
        die "not all ${#NODES[@]} nodes are up"
    }
    if [ "$(conf_accounting)" = 1 ]; then
        dbd_answers || die "slurmdbd does not answer (run: bash $0 start)"
        echo "accounting: slurmdbd on 127.0.0.1:$DBD_PORT"
    else
        echo "accounting: none"
    fi
    echo "slurm cluster up: $(sinfo -h -o '%P %D %T' | tr '\n' ' ')"
    ;;
stop)
    stop_cluster
    ;;
restart)
    [ "${2:-}" = slurmctld ] && { [ $# = 2 ] || [ "${3:-}" = --down ]; } ||
        die "usage: $0 restart slurmctld [--down SECONDS]"
    need_root "restart slurmctld"
    controller_up || die "slurmctld does not answer (run: bash $0 start)"
    t_start="$(now_ms)"
    stop_pidfiles slurmctld "$STATE/slurmctld.pid"
    sleep "${4:-0}"
    # no -c: the controller reads its saved state, so the jobs it had are its jobs again
    start_detaching_daemon slurmctld "$STATE/slurmctld.pid" "$LOGDIR/slurmctld.out" slurmctld -i
    for ((i = 0; i < WAIT_S * 4; i++)); do
        controller_up && break
        sleep 0.25
    done
    controller_up || die "slurmctld did not answer within $WAIT_S s after its restart"
    echo "slurmctld answers again after $(elapsed "$t_start")"
    ;;
*)
    echo "usage: $0 start [--no-accounting]|status|stop|restart slurmctld [--down SECONDS]" >&2
    exit 2
    ;;
esac
