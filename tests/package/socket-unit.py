#!/usr/bin/python3
"""socket-unit.py SOCKET_UNIT INSTANCE USER -- CMD...

What systemd does for a service that requires pin-host-api@.socket, for the
package test (./dev, package_test), where systemd is not PID 1: listens on
the socket unit's ListenStream (its SocketUser, SocketGroup, SocketMode and
Backlog, %i replaced by INSTANCE) and holds that socket for as long as it
runs; starts CMD as USER with the socket as fd 3 (LISTEN_FDS=1,
LISTEN_PID), as systemd starts the service.
  SIGHUP    what `systemctl restart` does: SIGTERM to CMD, wait for it to
            exit (30 s, TimeoutStopSec, then SIGKILL), start CMD again on
            the same socket.  What arrives in between waits in the queue.
  SIGTERM   stop CMD, remove the socket (RemoveOnStop=yes), exit.
A CMD that exits by itself with a failure is started again after 2 s
(Restart=on-failure, RestartSec=2).  The pid of the running CMD is written
to the file named by $PIN_SOCKET_UNIT_PIDFILE if set.
"""
import grp
import os
import pwd
import signal
import socket
import sys
import time


def settings(path, instance):
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and line[0] not in "#;[" and "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip().replace("%i", instance)
    return out


def log(msg):
    sys.stderr.write("socket-unit: %s\n" % msg)
    sys.stderr.flush()


def main():
    if len(sys.argv) < 6 or sys.argv[4] != "--":
        sys.exit(__doc__)
    unit, instance, user, cmd = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5:]
    s = settings(unit, instance)
    path = s["ListenStream"]
    pw = pwd.getpwnam(user)
    handled = [signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD]
    signal.pthread_sigmask(signal.SIG_BLOCK, handled)

    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chown(path, pwd.getpwnam(s.get("SocketUser", "root")).pw_uid,
             grp.getgrnam(s.get("SocketGroup", "root")).gr_gid)
    os.chmod(path, int(s.get("SocketMode", "0666"), 8))
    sock.listen(int(s.get("Backlog", "128")))
    pidfile = os.environ.get("PIN_SOCKET_UNIT_PIDFILE")

    def start():
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(sock.fileno(), 3)
                os.set_inheritable(3, True)
                os.setgroups([])
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)
                env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LISTEN_FDS": "1",
                       "LISTEN_FDNAMES": os.path.basename(unit),
                       "LISTEN_PID": str(os.getpid())}
                signal.pthread_sigmask(signal.SIG_SETMASK, [])
                os.execve(cmd[0], cmd, env)
            finally:
                os._exit(127)
        if pidfile:
            with open(pidfile + ".tmp", "w") as f:
                f.write("%d\n" % pid)
            os.replace(pidfile + ".tmp", pidfile)
        log("started pid %d on %s" % (pid, path))
        return pid

    def stop(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                log("pid %d exited (status %d)" % (pid, status))
                return
            time.sleep(0.02)
        log("pid %d did not stop in 30 s, killing" % pid)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

    child = start()
    while True:
        info = signal.sigtimedwait(handled, 1.0)
        if info is None:
            continue
        if info.si_signo == signal.SIGHUP:
            log("restart")
            stop(child)
            child = start()
        elif info.si_signo in (signal.SIGTERM, signal.SIGINT):
            stop(child)
            sock.close()
            os.unlink(path)
            return
        elif info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                log("pid %d exited by itself (status %d)" % (child, status))
                if status == 0:
                    sock.close()
                    os.unlink(path)
                    return
                time.sleep(2)
                child = start()


if __name__ == "__main__":
    main()
