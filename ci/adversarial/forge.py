#!/usr/bin/env python3
"""Builds the broken inputs of ci/adversarial.sh (HDF5 records, Megatron datasets, JSON, XML).

Record edits keep each group's 'tensor_index' attribute in step with its datasets (names,
shapes), so that a forged record reaches the code its reproducer targets instead of being
refused as inconsistent. Each subcommand edits or writes one file and prints nothing on success
(h5-ls, h5-first and long-path print their answer); an error is a Python traceback and a
non-zero exit (the campaign then reports that reproducer's setup as failed). The h5-* subcommands
need h5py and numpy (Debian: apt-get install python3-h5py).

  forge.py h5-ls REC                          print every group, dataset (shape, dtype), attribute
  forge.py h5-scalar REC DATASET              replace DATASET by a scalar of its dtype (attrs kept)
  forge.py h5-huge REC DATASET ELEMENTS       replace DATASET by one declaring ELEMENTS elements
  forge.py h5-rename REC OLD NEW              move dataset OLD to NEW (same parent group)
  forge.py h5-attr REC NAME int|float|str V   set a root attribute (V: 4294967297, nan, -inf, ...)
  forge.py h5-set REC DATASET VALUE           set the first element of DATASET (nan, -1, ...)
  forge.py h5-group REC PATH                  create an empty group
  forge.py h5-first REC GROUP PART            print the first dataset under GROUP whose path
                                              ends in PART, else the first that holds PART
  forge.py megatron-bomb PREFIX N BIN_BYTES   N uint16 sequences that all span the whole .bin
  forge.py deep-json PATH DEPTH               Google Benchmark JSON whose context nests DEPTH deep
  forge.py bench-json PATH NAME TIME [REPS]   a valid Google Benchmark JSON (REPS repetitions)
  forge.py raw-number-json PATH NUMBER        benchmark JSON whose real_time is NUMBER verbatim
  forge.py flip PATH OFFSET                   xor the byte at OFFSET (negative: from the end) with 0xff
  forge.py truncate PATH BYTES                keep the first BYTES bytes (a fraction 0<f<1: of the size)
  forge.py xml-ok PATH                        exit 0 iff PATH parses as XML (xml.etree)
  forge.py json-ok PATH                       exit 0 iff PATH parses as JSON
  forge.py long-path DIR TOTAL                create directories under DIR so that DIR/.../f has
                                              TOTAL bytes; print that path (the file is not made)
"""
import json
import os
import struct
import sys


def _h5():
    import h5py  # noqa: imported lazily: most subcommands do not need it
    return h5py


def h5_ls(rec):
    h5py = _h5()
    with h5py.File(rec, "r") as f:
        for k, v in f.attrs.items():
            print(f"@{k} = {v!r}")

        def show(name, obj):
            if isinstance(obj, h5py.Dataset):
                print(f"{name} {obj.shape} {obj.dtype}")
            else:
                print(f"{name}/")
            for k, v in obj.attrs.items():
                print(f"  @{k} = {v!r}")
        f.visititems(show)


def _link_names(group):
    """The group's link names in the order the harness lists them (harness/record/h5.cc: creation
    order when the group tracks it, else name order)."""
    h5 = _h5().h5
    tracked = group.id.get_create_plist().get_link_creation_order() != 0
    names = []
    group.id.links.iterate(lambda n: names.append(n.decode("utf-8", "surrogateescape")),
                           idx_type=h5.INDEX_CRT_ORDER if tracked else h5.INDEX_NAME)
    return names


def _sync_index(group, renamed=None, shapes=None):
    """Rewrites the group's tensor_index attribute (JSON [name, dtype, [shape], storage, digest]
    per dataset, in link order) after datasets were renamed or reshaped, so that the record stays
    self-consistent and the reproducer reaches the code it targets."""
    renamed, shapes = renamed or {}, shapes or {}
    if "tensor_index" not in group.attrs:
        return
    raw = group.attrs["tensor_index"]
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    entries = {}
    for e in json.loads(text):
        name = renamed.get(e[0], e[0])
        e[0] = name
        if name in shapes:
            e[2] = shapes[name]
        entries[name] = e
    import numpy as np
    text = json.dumps([entries[n] for n in _link_names(group)], separators=(",", ":"))
    group.attrs["tensor_index"] = np.bytes_(text.encode())  # fixed-length, as the writer


def _split(path):
    parent, _, name = path.rstrip("/").rpartition("/")
    return parent, name


def h5_scalar(rec, path):
    h5py = _h5()
    import numpy as np
    with h5py.File(rec, "r+") as f:
        old = f[path]
        dtype, attrs = old.dtype, dict(old.attrs)
        value = old[()].reshape(-1)[0] if old.size else np.zeros((), dtype)
        del f[path]
        new = f.create_dataset(path, data=np.array(value, dtype=dtype))
        for k, v in attrs.items():
            new.attrs[k] = v
        parent, name = _split(path)
        _sync_index(f[parent], shapes={name: []})


def h5_huge(rec, path, elements):
    """Replaces DATASET by a chunked one declaring ELEMENTS elements (nothing written: the file
    stays small) and says so in the index."""
    h5py = _h5()
    with h5py.File(rec, "r+") as f:
        old = f[path]
        dtype, attrs = old.dtype, dict(old.attrs)
        del f[path]
        n = int(elements)
        new = f.create_dataset(path, shape=(n,), dtype=dtype, chunks=(min(n, 65536),))
        for k, v in attrs.items():
            new.attrs[k] = v
        parent, name = _split(path)
        _sync_index(f[parent], shapes={name: [n]})


def h5_rename(rec, old, new):
    with _h5().File(rec, "r+") as f:
        f.move(old, new)
        parent, old_name = _split(old)
        _sync_index(f[parent], renamed={old_name: _split(new)[1]})


def h5_attr(rec, name, kind, value):
    import numpy as np
    conv = {"int": lambda v: np.int64(int(v)), "float": lambda v: np.float64(float(v)),
            "str": str}[kind]
    with _h5().File(rec, "r+") as f:
        f.attrs[name] = conv(value)


def h5_set(rec, path, value):
    with _h5().File(rec, "r+") as f:
        d = f[path]
        data = d[()]
        flat = data.reshape(-1)
        flat[0] = float(value)
        d[...] = flat.reshape(data.shape)


def h5_group(rec, path):
    with _h5().File(rec, "r+") as f:
        f.create_group(path)


def h5_first(rec, group, part):
    h5py = _h5()
    with h5py.File(rec, "r") as f:
        names = []
        f[group].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        # A name ending in PART first (".exp_avg" is not ".exp_avg_sq"), else one holding it.
        found = [n for n in names if n.endswith(part)] or [n for n in names if part in n]
        if not found:
            sys.exit(f"forge.py: no dataset under {group} holds '{part}'")
        print(f"{group.rstrip('/')}/{found[0]}")


def megatron_bomb(prefix, n, bin_bytes):
    # MMIDIDX as harness/data/indexed_dataset.cc reads it: magic 9, version u64 = 1, dtype u8
    # (8 = uint16), sequence count u64, document count u64, then int32 lengths[n], int64
    # pointers[n], int64 document_indices[d]. Every sequence is the whole .bin (token 0).
    n, bin_bytes = int(n), int(bin_bytes)
    tokens = bin_bytes // 2
    with open(prefix + ".bin", "wb") as f:
        f.truncate(bin_bytes)
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<QBQQ", 1, 8, n, 2))
        f.write(struct.pack(f"<{n}i", *([tokens] * n)))
        f.write(struct.pack(f"<{n}q", *([0] * n)))
        f.write(struct.pack("<2q", 0, n))


def _bench_doc(name, time, reps):
    return {"context": {"date": "2026-12-02", "host_name": "adversarial", "num_cpus": 2},
            "benchmarks": [{"name": name, "run_name": name, "run_type": "iteration",
                            "repetitions": reps, "repetition_index": i, "iterations": 10,
                            "real_time": time, "cpu_time": time, "time_unit": "ns"}
                           for i in range(reps)]}


def deep_json(path, depth):
    depth = int(depth)
    doc = json.dumps(_bench_doc("BM_Deep", 100.0, 5))
    # {"context": {"deep": [[[...]]], ...: the nesting is spliced in as text (json.dumps recurses).
    nested = "[" * depth + "]" * depth
    doc = doc.replace('"context": {', '"context": {"deep": ' + nested + ", ", 1)
    with open(path, "w") as f:
        f.write(doc)


def bench_json(path, name, time, reps="5"):
    with open(path, "w") as f:
        json.dump(_bench_doc(name, float(time), int(reps)), f, indent=2)


def raw_number_json(path, number):
    doc = json.dumps(_bench_doc("BM_Big", 123456.0, 5), indent=2)
    with open(path, "w") as f:
        f.write(doc.replace("123456.0", number))


def flip(path, offset):
    offset = int(offset)
    with open(path, "r+b") as f:
        size = f.seek(0, 2)
        at = offset if offset >= 0 else size + offset
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))


def truncate(path, amount):
    size = os.path.getsize(path)
    keep = int(size * float(amount)) if "." in amount else int(amount)
    os.truncate(path, keep)


def xml_ok(path):
    import xml.etree.ElementTree as ET
    ET.parse(path)


def json_ok(path):
    with open(path, "rb") as f:
        json.loads(f.read().decode("utf-8"))


def long_path(top, total):
    total = int(total)
    path = os.path.abspath(top)
    while total - len(path) > 250:
        path = os.path.join(path, "d" * 200)
    os.makedirs(path, exist_ok=True)
    leaf = total - len(path) - 1
    if leaf < 1:
        sys.exit("forge.py long-path: no room for a file name")
    print(os.path.join(path, "f" * leaf))


COMMANDS = {"h5-ls": h5_ls, "h5-scalar": h5_scalar, "h5-huge": h5_huge, "h5-rename": h5_rename, "h5-attr": h5_attr,
            "h5-set": h5_set, "h5-group": h5_group, "h5-first": h5_first,
            "megatron-bomb": megatron_bomb, "deep-json": deep_json, "bench-json": bench_json,
            "raw-number-json": raw_number_json, "flip": flip, "truncate": truncate,
            "xml-ok": xml_ok, "json-ok": json_ok, "long-path": long_path}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
