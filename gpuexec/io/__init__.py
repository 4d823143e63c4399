"""How a chunk's bytes become host or device arrays.

A chunk is a range of entries of one tree in one ROOT file. Its columns reach the
processor along one of two paths:

- **host arrays** (CPU pools, and GPU pools for anything the direct reader refuses): coffea
  builds NanoEvents through uproot, which reads the baskets and inflates them on the host
  (``inflate`` chooses the zlib library, python-isal or zlib, in each worker process);
- **device arrays** (GPU pools): ``device_read`` cuts each basket's compressed streams out
  of the file, inflates them on the host or, for large batches, on the device with nvCOMP,
  and turns the big-endian values into native device arrays in one copy.

``staging`` wraps a GPU pool's processor: the events are staged on an awkward backend,
each column is read (through ``device_read`` where it can) when the processor first
touches it, and the output is brought back to the host. ``kept_files`` runs coffea's work
function on files each worker thread keeps open between chunks, so a chunk does not pay
for the tree's metadata again.

Modules: ``inflate`` (which zlib library), ``device_read`` (baskets to device arrays),
``staging`` (events on a backend, results back), ``kept_files`` (files kept open).
"""
