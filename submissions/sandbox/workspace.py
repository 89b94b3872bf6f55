"""Workspaces: a fresh copy of the tree owned by the slot uid, removed without following links;
graded outputs read back as that uid."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path, PurePosixPath

from submissions.sandbox.libc import load_libc
from submissions.sandbox.types import (
    CHUNK,
    MNT_DETACH,
    MS_NODEV,
    MS_NOSUID,
    UMOUNT_NOFOLLOW,
    OutputFileRefused,
    WorkspaceError,
)
from submissions.sandbox.uids import as_uid, gid_of, searchable_by


def prepare_workspace(
    src: Path,
    dest_parent: Path,
    uid: int,
    *,
    quota_bytes: int | None = None,
    quota_inodes: int = 200_000,
    prefix: str = "ws-",
) -> Path:
    """Copy a validated submission tree into a fresh directory owned by uid; return its path.

    Nothing is followed: the source is walked through directory fds with O_NOFOLLOW and any
    symlink, FIFO or device in it is refused (the intake validator should already have
    dropped them). Files are created with O_EXCL in a root-only directory and chowned
    through their fds, so nothing can redirect a write or a chown. With quota_bytes the
    directory is a tmpfs mount (size and inode capped, nosuid, nodev) that bounds what the
    candidate can write in /work; remove_workspace() unmounts it.
    """
    gid = gid_of(uid)
    dest_parent = Path(dest_parent).resolve()
    blocked = searchable_by(dest_parent, uid, gid)
    if blocked is not None:
        # bwrap resolves bind sources as the sandbox uid, so it must traverse the path.
        raise WorkspaceError(f"{blocked} is not searchable by sandbox uid {uid}: chmod o+x it")
    dest = Path(tempfile.mkdtemp(prefix=prefix, dir=dest_parent))
    try:
        if quota_bytes is not None:
            opts = f"size={quota_bytes},nr_inodes={quota_inodes},mode=0700"
            libc = load_libc()
            if (
                libc.mount(
                    b"tmpfs", os.fsencode(dest), b"tmpfs", MS_NOSUID | MS_NODEV, opts.encode()
                )
                != 0
            ):
                err = ctypes.get_errno()
                raise WorkspaceError(f"cannot mount the workspace tmpfs: {os.strerror(err)}")
        src_fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        dst_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            _copy_tree(src_fd, dst_fd, uid, gid, PurePosixPath("."))
            # Handed to the uid last: until now nobody but root could write in it.
            os.fchown(dst_fd, uid, gid)
            os.fchmod(dst_fd, 0o700)
        finally:
            os.close(src_fd)
            os.close(dst_fd)
    except BaseException:
        remove_workspace(dest)
        raise
    return dest


def _copy_tree(sfd: int, dfd: int, uid: int, gid: int, rel: PurePosixPath) -> None:
    """Copy the directory at sfd into dfd, refusing anything but regular files and directories."""
    with os.scandir(sfd) as it:
        entries = sorted(e.name for e in it)
    for name in entries:
        st = os.stat(name, dir_fd=sfd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            os.mkdir(name, 0o700, dir_fd=dfd)
            nsfd = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=sfd
            )
            ndfd = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd
            )
            try:
                _copy_tree(nsfd, ndfd, uid, gid, rel / name)
                os.fchown(ndfd, uid, gid)
                os.fchmod(ndfd, 0o755)
                os.utime(ndfd, ns=(st.st_atime_ns, st.st_mtime_ns))
            finally:
                os.close(nsfd)
                os.close(ndfd)
        elif stat.S_ISREG(st.st_mode):
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            in_fd = os.open(name, flags, dir_fd=sfd)
            try:
                fst = os.fstat(in_fd)
                if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (
                    st.st_dev,
                    st.st_ino,
                ):
                    raise WorkspaceError(f"submission source changed while copying: {rel / name}")
                out_fd = os.open(
                    name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o600,
                    dir_fd=dfd,
                )
                try:
                    remaining = fst.st_size
                    while remaining > 0:
                        sent = os.sendfile(out_fd, in_fd, None, min(remaining, 1 << 24))
                        if sent == 0:
                            break
                        remaining -= sent
                    os.fchown(out_fd, uid, gid)
                    # Normalised modes: no setuid/setgid/sticky, no group/other write.
                    os.fchmod(out_fd, 0o755 if st.st_mode & 0o111 else 0o644)
                    os.utime(out_fd, ns=(st.st_atime_ns, st.st_mtime_ns))
                finally:
                    os.close(out_fd)
            finally:
                os.close(in_fd)
        else:
            kind = "symlink" if stat.S_ISLNK(st.st_mode) else "special file"
            raise WorkspaceError(f"refusing {kind} in submission source: {rel / name}")


def remove_workspace(path: Path) -> None:
    """Remove a workspace the candidate had write access to, never following its links.

    First pass as the owning (sandbox) uid, so a traversal mistake can only touch what that
    uid owns; it chmods directories back to 0700 as it goes (the candidate may have left
    0000 ones) and hoists very deep trees to the top instead of holding an fd per level.
    Then root removes what is left with shutil.rmtree, which works through directory fds
    and never follows links. A tmpfs workspace is simply unmounted.
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)  # a link or file where the workspace was: remove the entry, not its target
        return
    if os.path.ismount(path):
        if load_libc().umount2(os.fsencode(path), MNT_DETACH | UMOUNT_NOFOLLOW) != 0:
            raise OSError(ctypes.get_errno(), "cannot unmount workspace", str(path))
        os.rmdir(path)
        return
    if st.st_uid != 0 and st.st_uid != os.geteuid() and os.geteuid() == 0:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            as_uid(st.st_uid, lambda _w: _purge_as_owner(top), 0)
        finally:
            os.close(top)
    shutil.rmtree(path)


def _purge_as_owner(top: int) -> int:
    """Delete everything below the directory fd top (runs in the uid child of as_uid)."""
    os.fchmod(top, 0o700)
    while True:  # each pass deletes entries or hoists deep directories to the top
        with os.scandir(top) as it:
            before = {e.name for e in it}
        if not before:
            return 0
        _purge_dir(top, top, 0)
        with os.scandir(top) as it:
            if {e.name for e in it} == before:
                return 1  # stuck: root's pass takes over


def _purge_dir(top: int, dfd: int, depth: int) -> None:
    """Delete entries of dfd; below depth 32, move subdirectories up to top instead."""
    with os.scandir(dfd) as it:
        names = [e.name for e in it]
    for name in names:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=dfd)  # files, links, FIFOs: the entry itself
                continue
            if depth >= 32:
                os.rename(name, f".cr-purge-{os.urandom(8).hex()}", src_dir_fd=dfd, dst_dir_fd=top)
                continue
            # O_PATH opens even a 0000 directory; chmod goes through /proc to that very inode.
            pfd = os.open(
                name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd
            )
            try:
                os.chmod(f"/proc/self/fd/{pfd}", 0o700)
                sub = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=pfd)
            finally:
                os.close(pfd)
            try:
                _purge_dir(top, sub, depth + 1)
            finally:
                os.close(sub)
            os.rmdir(name, dir_fd=dfd)
        except OSError:
            continue  # root's pass removes what we could not


def output_file_stamp(workspace: Path, relpath: str, uid: int | None) -> str | None:
    """The identity and change time of a file in the workspace ("dev:inode:ctime_ns"), or None.

    Taken before and after a run, it tells whether the run wrote the file (a rewrite in
    place moves the change time, a replacement changes the inode) without touching the
    candidate's tree. The lookup is read_output_file's walk, as uid, never following links;
    anything but a regular file (absent, a link, a FIFO) has no stamp.
    """
    try:
        return _in_child(workspace, relpath, 0, uid, truncate=False, stamp=True).decode()
    except (OSError, OutputFileRefused):
        return None


def read_output_file(
    workspace: Path, relpath: str, max_bytes: int, uid: int | None, *, truncate: bool = False
) -> bytes:
    """Read a file the candidate wrote, as uid, refusing links, FIFOs and devices without blocking.

    Each component is opened relative to the previous directory fd with O_NOFOLLOW, the
    final one is lstat'ed first (a FIFO or device is refused before any open) and then
    opened O_NONBLOCK|O_NOFOLLOW and checked to be the same regular file. The reading
    happens in a forked child that dropped to uid (see as_uid), so even a bug here reads
    nothing the candidate could not. Raises FileNotFoundError when absent and
    OutputFileRefused otherwise; a file over max_bytes is refused unless truncate=True.
    """
    return _in_child(workspace, relpath, max_bytes, uid, truncate=truncate, stamp=False)


def _parts(relpath: str) -> list[str]:
    """The components of a relative path inside the workspace, or ValueError."""
    parts = [p for p in PurePosixPath(relpath).parts if p != "."]
    if not parts or PurePosixPath(relpath).is_absolute() or ".." in parts or "\0" in relpath:
        raise ValueError(f"relpath must be a relative path inside the workspace: {relpath!r}")
    return parts


def _in_child(
    workspace: Path, relpath: str, max_bytes: int, uid: int | None, *, truncate: bool, stamp: bool
) -> bytes:
    """read_output_file's work (or, with stamp, the file's stamp) in a child running as uid."""
    parts = _parts(relpath)
    base = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def child(w: int) -> int:
        status, payload = _read_in_child(base, parts, max_bytes, truncate, stamp)
        view = memoryview(status + payload)
        while view:
            view = view[os.write(w, view) :]
        return 0

    try:
        code, out = as_uid(uid, child, max_bytes + 4096)
    finally:
        os.close(base)
    if code != 0 or not out:
        raise OutputFileRefused(errno.EIO, f"reader failed (exit {code})", relpath)
    return _answer(out[:1], out[1:], relpath)


def _answer(status: bytes, payload: bytes, relpath: str) -> bytes:
    """The payload of a lookup that found the file; the error it stands for otherwise."""
    if status == b"O":
        return payload
    if status == b"N":
        raise FileNotFoundError(errno.ENOENT, payload.decode(), relpath)
    raise OutputFileRefused(errno.EPERM, payload.decode(), relpath)


def fresh_file_stamps(workspace: Path, relpaths: list[str]) -> dict[str, str | None]:
    """output_file_stamp of each path, for a workspace no candidate code has run in yet.

    Taken in this process: the fresh copy holds only regular files and folders that
    prepare_workspace made (it refuses links and special files), so nothing in it can be
    planted yet, and the walk is the same no-follow walk. Saves a fork per path.
    """
    base = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        stamps: dict[str, str | None] = {}
        for rel in relpaths:
            status, payload = _read_in_child(base, _parts(rel), 0, False, stamp=True)
            stamps[rel] = payload.decode() if status == b"O" else None
        return stamps
    finally:
        os.close(base)


ReadBack = dict[str, tuple[str | None, bytes | OSError | None]]


def outputs_read_back(
    workspace: Path, relpaths: list[str], before: dict[str, str | None], max_bytes: int, uid: int
) -> ReadBack:
    """After a run: each path's stamp and, when the stamp moved from `before` (the run wrote
    it), its content; all in one child running as uid (see read_output_file).

    Per path: (stamp or None, content or the error reading it (FileNotFoundError,
    OutputFileRefused) or None when unchanged). A path whose stamp did not move is not read.
    """
    lookups = [(rel, _parts(rel)) for rel in relpaths]
    base = os.open(workspace, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)

    def child(w: int) -> int:
        for rel, parts in lookups:
            status, stamp = _read_in_child(base, parts, 0, False, stamp=True)
            frames = [status, stamp]
            if status == b"O" and stamp.decode() == before.get(rel):
                frames += [b"S", b""]  # untouched: not read
            else:
                frames += list(_read_in_child(base, parts, max_bytes, False))
            for i in range(0, len(frames), 2):
                head = frames[i] + len(frames[i + 1]).to_bytes(8, "big")
                view = memoryview(head + frames[i + 1])
                while view:
                    view = view[os.write(w, view) :]
        return 0

    try:
        code, out = as_uid(uid, child, len(lookups) * (max_bytes + 4096))
    finally:
        os.close(base)
    back: ReadBack = {}
    at = 0
    failed = OutputFileRefused(errno.EIO, f"reader failed (exit {code})")
    for rel, _ in lookups:
        frames = []
        for _ in range(2):
            if code != 0 or at + 9 > len(out):
                frames.append((b"E", b""))
                continue
            size = int.from_bytes(out[at + 1 : at + 9], "big")
            frames.append((out[at : at + 1], out[at + 9 : at + 9 + size]))
            at += 9 + size
        (s_status, stamp), (r_status, data) = frames
        content: bytes | OSError | None
        if r_status == b"S":
            content = None
        elif r_status == b"E":
            content = failed
        else:
            try:
                content = _answer(r_status, data, rel)
            except OSError as exc:
                content = exc
        back[rel] = (stamp.decode() if s_status == b"O" else None, content)
    return back


def _read_in_child(
    base: int, parts: list[str], max_bytes: int, truncate: bool, stamp: bool = False
) -> tuple[bytes, bytes]:
    """Return (status, payload): b'O' + data, b'N' + reason (absent) or b'R' + reason (refused)."""
    fds: list[int] = []
    try:
        dfd = base
        for i, name in enumerate(parts):
            where = "/".join(parts[: i + 1])
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                return b"N", f"no such file: {where}".encode()
            except PermissionError:
                return b"R", f"permission denied (as the sandbox uid): {where}".encode()
            last = i == len(parts) - 1
            if stat.S_ISLNK(st.st_mode):
                return b"R", f"refusing symlink: {where}".encode()
            if not last:
                if not stat.S_ISDIR(st.st_mode):
                    return b"R", f"not a directory: {where}".encode()
                dfd = os.open(
                    name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd
                )
                fds.append(dfd)
                continue
            if not stat.S_ISREG(st.st_mode):
                kind = (
                    "FIFO"
                    if stat.S_ISFIFO(st.st_mode)
                    else "directory"
                    if stat.S_ISDIR(st.st_mode)
                    else "special file"
                )
                return b"R", f"refusing {kind}: {where}".encode()
            if stamp:
                return b"O", f"{st.st_dev}:{st.st_ino}:{st.st_ctime_ns}".encode()
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
            try:
                fd = os.open(name, flags, dir_fd=dfd)
            except PermissionError:
                return b"R", f"permission denied (as the sandbox uid): {where}".encode()
            except OSError as exc:
                return b"R", f"cannot open {where}: {exc.strerror}".encode()
            fds.append(fd)
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                return b"R", f"file changed while opening: {where}".encode()
            chunks, size = [], 0
            while size <= max_bytes:
                data = os.read(fd, min(CHUNK, max_bytes + 1 - size))
                if not data:
                    break
                chunks.append(data)
                size += len(data)
            if size > max_bytes and not truncate:
                return b"R", f"larger than {max_bytes} bytes: {where}".encode()
            return b"O", b"".join(chunks)[:max_bytes]
        return b"R", b"empty path"
    finally:
        for fd in fds:
            os.close(fd)
