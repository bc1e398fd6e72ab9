"""Real Git servers for the tests, on 127.0.0.1 free ports, started and stopped by the fixtures.

- `GitDaemon`: `git daemon` serving git:// (anonymous read, receive-pack enabled for push).
- `HttpGitServer`: `git http-backend` (CGI) behind lighttpd with basic auth (mod_auth, plain file).
- `SshGitServer`: a user-mode `sshd` with a generated host key and one authorized key.
Each can be stopped and started again on the same port (to take a remote down mid-cycle).
Bare repositories live under `root`; servers export every repository there.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, check: bool = True) -> str:
    full_env = {**os.environ, **GIT_ENV, "HOME": str(cwd or Path.cwd()), **(env or {})}
    proc = subprocess.run(["git", *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.strip()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def make_bare(root: Path, name: str) -> Path:
    """A bare repository that accepts pushes over every transport and refuses non-fast-forwards."""
    path = root / f"{name}.git"
    git("init", "--bare", "-q", "-b", "main", str(path))
    git("config", "receive.denyNonFastForwards", "true", cwd=path)
    git("config", "http.receivepack", "true", cwd=path)
    git("config", "daemon.receivepack", "true", cwd=path)
    return path


def seed(bare: Path, work: Path, files: dict[str, str], *, message: str = "seed", branch: str = "main") -> str:
    """Clone `bare` into `work` (if needed), write `files`, commit and push; return the commit id."""
    if not (work / ".git").exists():
        git("clone", "-q", str(bare), str(work))
        git("checkout", "-q", "-B", branch, cwd=work)
    for rel, text in files.items():
        target = work / rel
        if text is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", message, cwd=work)
    git("push", "-q", "origin", f"HEAD:{branch}", cwd=work)
    return git("rev-parse", "HEAD", cwd=work)


class _Server:
    port: int
    proc: subprocess.Popen[bytes] | None = None

    def _spawn(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        with log.open("ab") as out:
            # own process group: stop() kills exactly the processes this fixture started
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            wait_port(self.port)
        except RuntimeError:
            self.stop()
            raise RuntimeError(f"{argv[0]} did not start: {log.read_text()[-2000:]}") from None

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None
        # wait until the port is really closed, so "down" means down
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.1):
                    time.sleep(0.05)
            except OSError:
                return


class GitDaemon(_Server):
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}.git"

    def start(self) -> GitDaemon:
        argv = [
            "git", "daemon", "--reuseaddr", "--export-all", "--enable=receive-pack",
            f"--base-path={self.root}", "--listen=127.0.0.1", f"--port={self.port}", str(self.root),
        ]  # fmt: skip
        self._spawn(argv, self.root / "daemon.log")
        return self


class HttpGitServer(_Server):
    """git http-backend behind lighttpd, every URL under /git/ behind basic auth."""

    def __init__(self, root: Path, *, user: str = "ci", password: str = "s3cret", tls: bool = False) -> None:
        self.root = root
        self.port = free_port()
        self.user, self.password = user, password
        self.conf = root / f"lighttpd-{self.port}.conf"
        self.tls = tls
        self.ca_file = root / f"tls-{self.port}.crt"  # self-signed: it is its own CA

    def url(self, name: str) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/git/{name}.git"

    def _tls_config(self) -> str:
        if not self.tls:
            return ""
        key = self.root / f"tls-{self.port}.key"
        if not self.ca_file.exists():  # a restart keeps its certificate
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                 "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(self.ca_file)],
                check=True, capture_output=True,
            )  # fmt: skip
        return (
            'server.modules += ("mod_openssl")\n'
            f'ssl.engine = "enable"\nssl.pemfile = "{self.ca_file}"\nssl.privkey = "{key}"\n'
        )

    def start(self) -> HttpGitServer:
        lighttpd = shutil.which("lighttpd") or "/usr/sbin/lighttpd"
        exec_path = Path(git("--exec-path"))
        backend = exec_path / "git-http-backend"
        users = self.root / "htpasswd"
        users.write_text(f"{self.user}:{self.password}\n")
        docroot = self.root / "www"
        docroot.mkdir(exist_ok=True)
        self.conf.write_text(
            f"""
server.modules = ("mod_alias", "mod_setenv", "mod_auth", "mod_authn_file", "mod_cgi", "mod_accesslog")
server.document-root = "{docroot}"
server.bind = "127.0.0.1"
server.port = {self.port}
server.errorlog = "{self.root}/lighttpd-{self.port}-error.log"
accesslog.filename = "{self.root}/lighttpd-{self.port}-access.log"
server.max-request-size = 0
alias.url = ("/git" => "{backend}")
auth.backend = "plain"
auth.backend.plain.userfile = "{users}"
auth.require = ("/git" => ("method" => "basic", "realm" => "git", "require" => "valid-user"))
{self._tls_config()}
$HTTP["url"] =~ "^/git" {{
  cgi.assign = ("" => "")
  setenv.add-environment = ("GIT_PROJECT_ROOT" => "{self.root}", "GIT_HTTP_EXPORT_ALL" => "1")
}}
"""
        )
        self._spawn([lighttpd, "-D", "-f", str(self.conf)], self.root / f"lighttpd-{self.port}.out")
        return self


class SshGitServer(_Server):
    """A user-mode sshd on a loopback port; the client logs in as the current user with `client_key`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.dir = root / "sshd"
        self.dir.mkdir(exist_ok=True)
        self.host_key = self.dir / "host_ed25519"
        self.client_key = self.dir / "client_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key.name, "-f", str(key)], check=True)
        (self.dir / "authorized_keys").write_text(Path(f"{self.client_key}.pub").read_text())
        host_pub = Path(f"{self.host_key}.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.user = getpass.getuser()

    def url(self, name: str) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}{self.root}/{name}.git"

    def start(self) -> SshGitServer:
        sshd = shutil.which("sshd") or "/usr/sbin/sshd"
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation dir (root only)
        conf = self.dir / "sshd_config"
        conf.write_text(
            f"""
ListenAddress 127.0.0.1:{self.port}
HostKey {self.host_key}
PidFile {self.dir}/sshd.pid
AuthorizedKeysFile {self.dir}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
"""
        )
        self._spawn([sshd, "-D", "-e", "-f", str(conf)], self.dir / "sshd.log")
        return self


def cluster_yaml(*, verify: str = "", reports: str = "{branch: migplan-reports, path: reports}") -> str:
    return (
        "apiVersion: migplan/v1\nkind: Cluster\nmetadata: {name: test}\nspec:\n  migStrategy: mixed\n"
        f"  reports: {reports}\n{verify}"
    )


def node_yaml(name: str, *, owner: str = "svc-a", profile: str = "3g.71gb") -> str:
    """A valid H200 node (the 3g+2g+1g+1g cut); `profile` lets a test make it invalid."""
    return f"""apiVersion: migplan/v1
kind: Node
metadata: {{name: {name}}}
spec:
  gpus:
    - index: 0
      model: H200-141GB
      mig:
        enabled: true
        partitions:
          - {{profile: {profile}, placement: 4, owner: {owner}}}
          - {{profile: 2g.35gb, placement: 0, owner: embeddings}}
          - {{profile: 1g.18gb, placement: 2}}
          - {{profile: 1g.18gb, placement: 3}}
"""
