// Bulk copies between host memory and FileStorage slots, used by the
// CPU <-> FileBacked moves. Offsets and counts are in slots of itemsize
// bytes; failures throw std::system_error (from FileStorage).
#pragma once
#include <cstdint>

#include "files/file_storage.hpp"

namespace sw {

// Bytes per pread/pwrite call (and per staging buffer for file-to-file).
constexpr int64_t kFileChunkBytes = int64_t{64} << 20;

// Reads count slots starting at slot `first` of f into dst.
void file_read_span(const FileStorage& f, int64_t first, void* dst, int64_t count, int itemsize);
// Writes count slots from src to f starting at slot `first`; the file grows
// when the span ends past its current size.
void file_write_span(FileStorage& f, int64_t first, const void* src, int64_t count, int itemsize);
// Copies count slots between two files through a bounded staging buffer.
void file_copy_span(const FileStorage& src, int64_t src_first, FileStorage& dst, int64_t dst_first,
                    int64_t count, int itemsize);

// Makes the file open as dst_fd hold the first `bytes` bytes of the file
// open as src_fd (and nothing more), as cheaply as the file system allows: a
// reflink clone (FICLONE: btrfs, XFS) shares the blocks; otherwise
// copy_file_range copies in the kernel, data extents only (holes stay
// holes); pread/pwrite where neither works (another file system on each
// side, an old kernel). Never moves either file's offset but through
// SEEK_DATA/SEEK_HOLE probes of src_fd (the I/O here is positional).
// Throws std::system_error.
void copy_file_data(int src_fd, int dst_fd, int64_t bytes);

}  // namespace sw
