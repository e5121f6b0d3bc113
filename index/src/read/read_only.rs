//! A tantivy directory that never writes: an index served from a read-only volume (a Kubernetes
//! `readOnly` mount, an image layer) or by a user who does not own its files (a container's
//! non-root user) must open as well as one its builder serves. Tantivy's reader takes a lock file
//! while it loads segments, only to keep a concurrent writer's garbage collection away; a
//! published index has no writer, so the lock is granted without touching the disk, and every
//! write is refused.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, WatchCallback, WatchHandle, WritePtr,
};

#[derive(Debug, Clone)]
pub(crate) struct ReadOnlyDirectory {
    inner: MmapDirectory,
    path: PathBuf,
}

impl ReadOnlyDirectory {
    pub(crate) fn open(path: &Path) -> Result<ReadOnlyDirectory, tantivy::TantivyError> {
        Ok(ReadOnlyDirectory {
            inner: MmapDirectory::open(path)?,
            path: path.to_path_buf(),
        })
    }

    fn refused(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is opened read-only", self.path.display()),
        )
    }
}

impl Directory for ReadOnlyDirectory {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.inner.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        Err(DeleteError::IoError {
            io_error: Arc::new(self.refused()),
            filepath: path.to_path_buf(),
        })
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.inner.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        Err(OpenWriteError::IoError {
            io_error: Arc::new(self.refused()),
            filepath: path.to_path_buf(),
        })
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.inner.atomic_read(path)
    }

    fn atomic_write(&self, _path: &Path, _data: &[u8]) -> io::Result<()> {
        Err(self.refused())
    }

    fn sync_directory(&self) -> io::Result<()> {
        Ok(())
    }

    fn acquire_lock(&self, _lock: &Lock) -> Result<DirectoryLock, LockError> {
        Ok(DirectoryLock::from(Box::new(())))
    }

    fn watch(&self, watch_callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.inner.watch(watch_callback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_touch_nothing_and_writes_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let read_only = ReadOnlyDirectory::open(dir.path()).expect("open");
        let lock = Lock {
            filepath: PathBuf::from(".tantivy-meta.lock"),
            is_blocking: true,
        };
        let _held = read_only.acquire_lock(&lock).expect("lock");
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
        assert!(
            read_only
                .atomic_write(Path::new("meta.json"), b"{}")
                .is_err()
        );
        assert!(read_only.open_write(Path::new("x")).is_err());
        assert!(read_only.delete(Path::new("x")).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0);
    }
}
