"""Host-side cache of the files that task setup steps download.

OSWorld tasks name their assets by URL (mostly a model hub). Every desktop that
runs a task needs the same files, so the host downloads each URL once and keeps
it at `root/<sha256(url)>/<basename>`; actors that ask for the same URL at the
same time wait on one download. Files appear in the cache only complete
(written to a temporary file, then renamed), so a crash or a concurrent process
never leaves a half file that later looks valid.

Machines without access to the asset host (air-gapped clusters, CI) pre-seed
the cache: copy the file to the path `FileCache.path_for(url)` names, call
`FileCache.seed(url, local_file)`, or seed in bulk with `cua-rl cache seed`.
`file://` URLs and plain local paths are read where they are and never copied.

The root is `$CUA_RL_CACHE_DIR` (else ~/.cache/cua-rl/files). Mirrors: the
files are keyed by their original URL, and fetched from a mirror when one is
configured: `HF_ENDPOINT` (huggingface_hub's own variable, e.g. a corporate
hub mirror) replaces `https://huggingface.co` for the hub URLs every OSWorld
asset uses; `mirrors` maps any other URL prefix.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

import aiohttp

from cua_rl.errors import SetupStepError, naming_path
from cua_rl.retry import retrying

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


HF_HOST = "https://huggingface.co"


def default_cache_root() -> Path:
    """`$CUA_RL_CACHE_DIR`, else ~/.cache/cua-rl/files."""
    env = os.environ.get("CUA_RL_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cua-rl" / "files"


def default_mirrors() -> dict[str, str]:
    """URL prefix -> replacement from the environment (`HF_ENDPOINT`)."""
    endpoint = os.environ.get("HF_ENDPOINT", "").rstrip("/")
    return {HF_HOST: endpoint} if endpoint and endpoint != HF_HOST else {}


class FileCache:
    """Downloads URLs once per host and hands out local paths to them.

    One instance per process; the per-URL locks only coordinate coroutines of
    one event loop. Several processes may share `root`: the atomic rename makes
    a race cost one redundant download, never a corrupt file.
    """

    def __init__(
        self,
        root: Path,
        *,
        timeout_s: float = 300.0,
        attempts: int = 3,
        backoff_s: float = 1.0,
        session: aiohttp.ClientSession | None = None,
        mirrors: dict[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.mirrors = default_mirrors() if mirrors is None else dict(mirrors)
        """URL prefix -> prefix to fetch from instead (the cache key stays the URL)."""
        self.timeout_s = timeout_s
        """Total seconds one download attempt may take (OSWorld assets reach ~100 MB)."""
        self.attempts = max(1, attempts)
        """Tries per URL for connection errors and 5xx answers; a 4xx fails at once."""
        self.backoff_s = backoff_s
        """Pause before the second try; doubles for each further try."""
        self._session = session
        self._locks: dict[str, asyncio.Lock] = {}

    # layout --------------------------------------------------------------------

    @staticmethod
    def key(url: str) -> str:
        return hashlib.sha256(url.encode()).hexdigest()

    def path_for(self, url: str) -> Path:
        """Where the file of `url` lives (or must be put to pre-seed the cache)."""
        return self.root / self.key(url) / _basename(url)

    def cached(self, url: str) -> Path | None:
        """The cached file of `url`, or None.

        A pre-seeded directory may hold the file under another name (users copy
        what they have); a single regular file in it is accepted as well.
        """
        path = self.path_for(url)
        if path.is_file():
            return path
        folder = path.parent
        if folder.is_dir():
            files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
            if len(files) == 1:
                return files[0]
        return None

    def seed(self, url: str, source: Path | str) -> Path:
        """Put a local copy of `url` into the cache, for machines that cannot download it."""
        source = Path(source)
        if not source.is_file():
            raise SetupStepError(f"cannot seed the cache for {url}: {source} is not a file")
        target = self.path_for(url)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
        os.close(fd)
        try:
            shutil.copyfile(source, tmp)
            os.replace(tmp, target)
        finally:
            Path(tmp).unlink(missing_ok=True)
        return target

    def source_url(self, url: str) -> str:
        """Where `url` is fetched from: through the first matching mirror, if any."""
        for prefix, replacement in self.mirrors.items():
            if url.startswith(prefix):
                return replacement + url[len(prefix) :]
        return url

    # fetching ------------------------------------------------------------------

    async def fetch(self, url: str) -> Path:
        """A local path holding the content of `url`, downloading it at most once."""
        local = local_path(url)
        if local is not None:
            if not local.is_file():
                raise SetupStepError(f"{url}: no such local file ({local})")
            return local
        scheme = urlsplit(url).scheme.lower()
        if scheme not in ("http", "https"):
            raise SetupStepError(
                f"{url}: unsupported URL scheme {scheme!r}; expected http, https, file "
                "or a local path"
            )
        hit = self.cached(url)
        if hit is not None:
            return hit
        lock = self._locks.setdefault(self.key(url), asyncio.Lock())
        async with lock:
            hit = self.cached(url)  # another coroutine may have finished meanwhile
            if hit is not None:
                return hit
            return await self._download(url)

    async def _download(self, url: str) -> Path:
        """Download with retries of what a retry can cure (connection errors,
        timeouts, 408/429/5xx); a 4xx fails at once, and a local write error (full
        disk, read-only cache) propagates as the OSError it is, naming the file."""
        target = self.path_for(url)
        await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
        try:
            async for attempt in retrying(
                f"download of {url}",
                attempts=self.attempts,
                retry_on=_retryable,
                backoff_s=self.backoff_s,
                max_backoff_s=30.0,
            ):
                with attempt:
                    await self._download_once(url, target)
        except (_HttpStatus, TimeoutError, aiohttp.ClientError) as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            via = self.source_url(url)
            raise SetupStepError(
                f"cannot download {url}{f' (via {via})' if via != url else ''} ({last}). "
                "This machine may have no network access "
                f"to that host; pre-seed the cache by putting the file at {target} "
                "(or seed many with `cua-rl cache seed --from DIR`)"
            ) from exc
        log.info("cached %s at %s", url, target)
        return target

    async def _download_once(self, url: str, target: Path) -> None:
        timeout = aiohttp.ClientTimeout(
            total=self.timeout_s, sock_connect=min(30.0, self.timeout_s)
        )
        owns = self._session is None
        # trust_env: users behind an HTTP(S)_PROXY reach the asset host through it.
        session = self._session or aiohttp.ClientSession(trust_env=True)
        tmp = await asyncio.to_thread(_temp_file, target)
        try:
            async with session.get(self.source_url(url), timeout=timeout) as resp:
                if resp.status != 200:
                    raise _HttpStatus(resp.status, resp.reason or "")
                # unbuffered: a full disk fails in _write (naming the file), not at close
                with await asyncio.to_thread(open, tmp, "wb", buffering=0) as out:
                    async for chunk in resp.content.iter_chunked(_CHUNK):
                        await asyncio.to_thread(_write, out, chunk, tmp)
            await asyncio.to_thread(os.replace, tmp, target)
        finally:
            if owns:
                await session.close()
            await asyncio.to_thread(tmp.unlink, missing_ok=True)


def _write(out: BinaryIO, chunk: bytes, path: Path) -> None:
    """Write all of `chunk` to an unbuffered file (raw writes may be short)."""
    view = memoryview(chunk)
    with naming_path(path):
        while view:
            view = view[out.write(view) :]


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, _HttpStatus):
        return exc.status in _RETRYABLE_STATUS
    return isinstance(exc, TimeoutError | aiohttp.ClientError)


class _HttpStatus(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status} {reason}")
        self.status = status
        self.reason = reason


def local_path(url: str) -> Path | None:
    """The path a `file://` URL or a plain path names; None for network URLs."""
    parts = urlsplit(url)
    if parts.scheme.lower() == "file":
        return Path(url2pathname(unquote(parts.path)))
    if parts.scheme == "" or (len(parts.scheme) == 1 and os.name == "nt"):
        return Path(url).expanduser()
    return None


def _basename(url: str) -> str:
    """The URL's last path segment as a safe file name (keeps the extension apps need)."""
    name = PurePosixPath(unquote(urlsplit(url).path)).name
    name = name.replace("\\", "_").lstrip(".")
    return name[:200] or "download"


def _temp_file(target: Path) -> Path:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.close(fd)
    return Path(tmp)
