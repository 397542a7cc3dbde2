//! One file's contents as the servers see them: the durable bytes in BACKING plus the writes
//! no fsync has made durable yet, kept in memory page by page.
//!
//! The model is a page cache that never writes back on its own (as LazyFS's is): a write
//! dirties 4 KiB pages here, a truncate moves the logical size, and only `sync` (the file's
//! fsync / fdatasync, an O_SYNC or O_DSYNC write, msync) copies them into BACKING and
//! fdatasyncs it there. Dropping a `Content` is the power loss for that file.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The page size the dirty data is kept in.
pub const PAGE: u64 = 4096;

/// A file's backing copy and its unsynced writes.
#[derive(Debug)]
pub struct Content {
    /// The file in BACKING, opened read-write.
    file: File,
    /// Dirty pages by index; bytes past `size` in a page are always zero.
    pages: BTreeMap<u64, Vec<u8>>,
    /// The size the servers see.
    size: u64,
    /// Backing bytes at or past this offset are hidden (an unsynced truncate cut them off;
    /// growing again must show zeros, not the old bytes). Always `<= size`.
    floor: u64,
    /// Whether anything here is not in BACKING yet.
    dirty: bool,
}

impl Content {
    /// The file as BACKING holds it, nothing unsynced yet.
    pub fn open(file: File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        Ok(Self { file, pages: BTreeMap::new(), size: len, floor: len, dirty: false })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn is_dirty(&self) -> bool {
        self.dirty
    }

    /// Bytes held back from BACKING (dirty pages; a changed size counts as one page).
    pub fn unsynced_bytes(&self) -> u64 {
        let pages = self.pages.len() as u64 * PAGE;
        if self.dirty && pages == 0 {
            PAGE
        } else {
            pages
        }
    }

    /// Up to `len` bytes at `off`, the unsynced writes included (a server reads its own writes).
    pub fn read(&self, off: u64, len: usize) -> io::Result<Vec<u8>> {
        if off >= self.size {
            return Ok(Vec::new());
        }
        let end = self.size.min(off.saturating_add(len as u64));
        let mut out = vec![0u8; (end - off) as usize];
        let mut pos = off;
        while pos < end {
            let idx = pos / PAGE;
            let chunk_end = end.min((idx + 1) * PAGE);
            let at = (pos % PAGE) as usize;
            let dst = &mut out[(pos - off) as usize..(chunk_end - off) as usize];
            match self.pages.get(&idx) {
                Some(page) => dst.copy_from_slice(&page[at..at + dst.len()]),
                None => self.read_backing(pos, dst)?,
            }
            pos = chunk_end;
        }
        Ok(out)
    }

    /// Keeps `data` at `off` in memory; BACKING is not touched.
    pub fn write(&mut self, off: u64, data: &[u8]) -> io::Result<()> {
        let end = off + data.len() as u64;
        let mut pos = off;
        while pos < end {
            let idx = pos / PAGE;
            let chunk_end = end.min((idx + 1) * PAGE);
            let at = (pos % PAGE) as usize;
            let src = &data[(pos - off) as usize..(chunk_end - off) as usize];
            self.page_mut(idx)?[at..at + src.len()].copy_from_slice(src);
            pos = chunk_end;
        }
        self.size = self.size.max(end);
        self.dirty = true;
        Ok(())
    }

    /// Sets the size the servers see; BACKING keeps its size until a sync.
    pub fn truncate(&mut self, new: u64) {
        if new < self.size {
            self.pages.retain(|&idx, _| idx * PAGE < new);
            if let Some(page) = self.pages.get_mut(&(new / PAGE)) {
                page[(new % PAGE) as usize..].fill(0);
            }
            self.floor = self.floor.min(new);
        }
        self.size = new;
        self.dirty = true;
    }

    /// Makes everything durable: BACKING gets the pages and the size, then fdatasync.
    /// Returns the bytes written.
    pub fn sync(&mut self) -> io::Result<u64> {
        if !self.dirty {
            return Ok(0);
        }
        if self.floor < self.file.metadata()?.len() {
            self.file.set_len(self.floor)?;
        }
        let mut written = 0;
        for (&idx, page) in &self.pages {
            let start = idx * PAGE;
            if start >= self.size {
                continue;
            }
            let n = PAGE.min(self.size - start) as usize;
            self.file.write_all_at(&page[..n], start)?;
            written += n as u64;
        }
        self.file.set_len(self.size)?;
        self.file.sync_data()?;
        self.pages.clear();
        self.floor = self.size;
        self.dirty = false;
        Ok(written)
    }

    fn page_mut(&mut self, idx: u64) -> io::Result<&mut Vec<u8>> {
        if !self.pages.contains_key(&idx) {
            let mut page = vec![0u8; PAGE as usize];
            let start = idx * PAGE;
            if start < self.floor {
                let n = PAGE.min(self.floor - start) as usize;
                read_at_most(&self.file, &mut page[..n], start)?;
            }
            self.pages.insert(idx, page);
        }
        Ok(self.pages.get_mut(&idx).expect("inserted above"))
    }

    /// Backing bytes for `dst` at `pos`; hidden or missing bytes stay zero.
    fn read_backing(&self, pos: u64, dst: &mut [u8]) -> io::Result<()> {
        if pos >= self.floor {
            return Ok(());
        }
        let n = (dst.len() as u64).min(self.floor - pos) as usize;
        read_at_most(&self.file, &mut dst[..n], pos)
    }
}

/// Fills `buf` from `off`, stopping early at end of file (the rest stays as it was: zero).
fn read_at_most(file: &File, buf: &mut [u8], off: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn backing(bytes: &[u8]) -> (File, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!(
            "faultfs-content-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        let mut f = File::options().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        f.write_all(bytes).unwrap();
        (f, path)
    }

    fn rand_suffix() -> u64 {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        N.fetch_add(1, Ordering::Relaxed)
    }

    #[test]
    fn unsynced_writes_are_read_back_but_not_in_backing() {
        let (f, path) = backing(&[b'a'; 5000]);
        let mut c = Content::open(f).unwrap();
        c.write(4090, b"XYZXYZXYZXYZ").unwrap();
        c.write(9000, b"tail").unwrap();
        let all = c.read(0, 10_000).unwrap();
        assert_eq!(all.len(), 9004);
        assert_eq!(&all[4090..4102], b"XYZXYZXYZXYZ");
        assert_eq!(&all[4102..5000], &[b'a'; 898][..]);
        assert!(all[5000..9000].iter().all(|&b| b == 0));
        assert_eq!(std::fs::read(&path).unwrap(), vec![b'a'; 5000]);
        c.sync().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), all);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_truncate_then_growth_shows_zeros_not_the_old_bytes() {
        let (f, path) = backing(&[b'a'; 8192]);
        let mut c = Content::open(f).unwrap();
        c.truncate(10);
        c.truncate(8192);
        let all = c.read(0, 8192).unwrap();
        assert_eq!(&all[..10], &[b'a'; 10]);
        assert!(all[10..].iter().all(|&b| b == 0), "old bytes came back after a truncate");
        assert_eq!(std::fs::read(&path).unwrap().len(), 8192, "backing changed before a sync");
        c.sync().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), all);
        std::fs::remove_file(path).unwrap();
    }
}
