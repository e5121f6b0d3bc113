//! Handing memory the process has freed back to the kernel. glibc keeps freed blocks inside its
//! heaps for reuse and returns only what lies at a heap's top, so after tantivy frees its
//! indexing buffers a build stayed ~450 MiB larger than it needed at 1M chunks, through the
//! whole graph phase (BENCHMARKS.md, memory on one machine). `malloc_trim` returns every free
//! page of every heap. Elsewhere (musl, other systems) this does nothing.
#![allow(unsafe_code)]

/// Returns the process's freed heap pages to the kernel (glibc on Linux x86-64; a no-op
/// elsewhere). A build calls it between phases, where much was just freed.
pub fn release_free_memory() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` takes no pointer; it walks glibc's own free lists under their arena
    // locks, so it is sound from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
