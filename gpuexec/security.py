"""TLS credentials for one Dask cluster: a key and a self-signed certificate that is also
the only certificate authority its scheduler, workers and clients trust, so that a peer
without this job's files is refused (docs/deploy.md#security).

    from gpuexec import security
    sec = security.make_credentials(run_dir / "tls")   # once, where the scheduler starts
    sec = security.load(run_dir / "tls")               # a worker or client of that job

The folder is made 0700 and its files 0600; the key never leaves it. Dask's own
``Security.temporary()`` makes the same kind of pair in memory only, which processes
started by ``srun`` on other nodes cannot share.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

CERT = "cert.pem"
KEY = "key.pem"


def private_dir(path: str | os.PathLike) -> Path:
    """``path`` made (with its missing parents) and set to 0700; an existing folder of
    another user is refused."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to another user")
    os.chmod(path, 0o700)
    return path


def write_private(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` created 0600 (never readable by others, even briefly)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path


def security(cert: str, key: str, **kwargs):
    """A Dask ``Security`` for every role with ``cert``/``key`` (file names or PEM text);
    ``cert`` is also the only authority trusted; encryption is required."""
    from distributed.security import Security

    return Security(require_encryption=True, tls_ca_file=cert,
                    tls_client_cert=cert, tls_client_key=key,
                    tls_scheduler_cert=cert, tls_scheduler_key=key,
                    tls_worker_cert=cert, tls_worker_key=key, **kwargs)


def make_credentials(directory: str | os.PathLike):
    """New credentials written to ``directory`` (0700; ``cert.pem``, ``key.pem`` 0600);
    returns their ``Security``. Needs the ``cryptography`` package."""
    from distributed.security import Security

    directory = private_dir(directory)
    fresh = Security.temporary()  # a 2048-bit RSA key and its self-signed certificate
    write_private(directory / KEY, fresh.tls_client_key)
    write_private(directory / CERT, fresh.tls_client_cert)
    return load(directory)


def load(directory: str | os.PathLike):
    """The ``Security`` of credentials that ``make_credentials`` wrote to ``directory``;
    refuses files that others can read."""
    directory = Path(directory)
    for name in (CERT, KEY):
        path = directory / name
        if not path.exists():
            raise FileNotFoundError(f"no TLS credentials: {path} is missing")
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            raise PermissionError(f"{path} is readable by others (chmod 600 it)")
    return security(str(directory / CERT), str(directory / KEY))


def worker_options(directory: str | os.PathLike) -> list[str]:
    """``dask worker`` / ``dask scheduler`` options that use these credentials."""
    directory = Path(directory)
    return ["--tls-ca-file", str(directory / CERT), "--tls-cert", str(directory / CERT),
            "--tls-key", str(directory / KEY)]
