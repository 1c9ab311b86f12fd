#!/usr/bin/env python3
"""Writes the pack bundle seeds of corpus/pack_bundle (run from tests/fuzz): a valid bundle as
grpo pack bundle lays it out (st/pack.ini, st/libst.so, st/SHA256SUMS), as .tar.gz and as a
plain tar; tars that break step 1 of pack_install.h (a '..' path, an absolute path, a symlink, a
hardlink, a second top folder, an entry declaring 3 GiB: the size limit); and "#entries" inputs
(fuzz_pack_bundle.c builds those tars itself). Deterministic: mtime 0, no gzip name or time."""
import gzip
import hashlib
import io
import os
import tarfile

OUT = "corpus/pack_bundle"
PACK_INI = b"[pack]\nname = st\nversion = 0.0.1\nabi = 1.0\nlibrary = libst.so\n"
LIB = b"\x7fELF not really a library\n"


def sums(files):
    return b"".join(b"%s  %s\n" % (hashlib.sha256(d).hexdigest().encode(), n.encode())
                    for n, d in files)


def tar(entries):
    """entries: (name, data or None for a folder, {TarInfo attributes})."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, data, attrs in entries:
            info = tarfile.TarInfo(name)
            info.mtime, info.mode = 0, 0o755 if data is None else 0o644
            info.type = tarfile.DIRTYPE if data is None else tarfile.REGTYPE
            for k, v in attrs.items():
                setattr(info, k, v)
            info.size = len(data) if data is not None and info.type == tarfile.REGTYPE else 0
            t.addfile(info, io.BytesIO(data) if info.size else None)
        end = t.offset
    return buf.getvalue()[:end] + b"\0" * 1024  # the two end blocks, no record padding


def write(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    files = [("pack.ini", PACK_INI), ("libst.so", LIB)]
    good = [("st", None, {})] + [("st/" + n, d, {}) for n, d in files]
    good.append(("st/SHA256SUMS", sums(files), {}))
    write("valid.tar", tar(good))
    write("valid.tar.gz", gzip.compress(tar(good), mtime=0))
    write("dotdot.tar", tar(good + [("st/../../evil", b"evil\n", {})]))
    write("absolute.tar", tar([("/tmp/evil", b"evil\n", {})] + good))
    write("symlink.tar", tar(good + [("st/link", b"", {"type": tarfile.SYMTYPE,
                                                        "linkname": "/etc/passwd"})]))
    write("hardlink.tar", tar(good + [("st/hard", b"", {"type": tarfile.LNKTYPE,
                                                        "linkname": "st/pack.ini"})]))
    write("two_tops.tar", tar(good + [("other/x", b"x\n", {})]))
    # a header that declares 3 GiB and no data: refused by the size limit before anything is read
    huge = tarfile.TarInfo("st/huge.bin")
    huge.size, huge.mtime = 3 << 30, 0
    write("huge_entry.tar", huge.tobuf(tarfile.PAX_FORMAT))
    write("entries_valid.txt", b"#entries\nd 0 st\nf 40 st/pack.ini\nf 3 st/SHA256SUMS\n")
    write("entries_escape.txt", b"#entries\nf 1 st/a\nl 0 st/up>..\nf 2 st/up/x\n"
          b"f 2 st/../../../../x\nh 0 st/h>/etc/passwd\np 0 st/fifo\nc 0 st/dev\n")


if __name__ == "__main__":
    main()
