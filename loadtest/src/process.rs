//! The server process as the kernel sees it (Linux `/proc`): CPU time and resident memory, so a
//! report can say CPU-seconds per query and how much memory serving took.

use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct ServerProcess {
    proc_dir: PathBuf,
    ticks_per_second: f64,
}

/// Resident memory of a process, in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Memory {
    /// Resident now (`VmRSS`) and at its peak (`VmHWM`).
    pub rss: u64,
    pub peak: u64,
    /// Of `rss`: private memory (`RssAnon`), and pages of mapped files (`RssFile`: a
    /// memory-mapped index, shared with the page cache and reclaimable under pressure).
    pub anon: u64,
    pub file: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuSample {
    /// User plus system CPU seconds since the process started.
    pub cpu_seconds: f64,
}

impl ServerProcess {
    pub fn new(pid: u32) -> anyhow::Result<ServerProcess> {
        let proc_dir = PathBuf::from(format!("/proc/{pid}"));
        anyhow::ensure!(
            proc_dir.join("stat").is_file(),
            "--server-pid {pid}: no such process on this machine"
        );
        Ok(ServerProcess {
            proc_dir,
            ticks_per_second: clock_ticks(),
        })
    }

    pub fn cpu(&self) -> Option<CpuSample> {
        let stat = std::fs::read_to_string(self.proc_dir.join("stat")).ok()?;
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        Some(CpuSample {
            cpu_seconds: (utime + stime) / self.ticks_per_second,
        })
    }

    /// Resident memory, in bytes.
    pub fn memory(&self) -> Option<Memory> {
        let status = std::fs::read_to_string(self.proc_dir.join("status")).ok()?;
        let field = |name: &str| -> Option<u64> {
            let line = status.lines().find(|l| l.starts_with(name))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        };
        Some(Memory {
            rss: field("VmRSS:")?,
            peak: field("VmHWM:")?,
            anon: field("RssAnon:")?,
            file: field("RssFile:")?,
        })
    }
}

/// `getconf CLK_TCK`, or the Linux default of 100 when it cannot be asked.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = ServerProcess::new(std::process::id()).expect("self");
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(me.cpu().expect("cpu").cpu_seconds > 0.0);
        let m = me.memory().expect("memory");
        assert!(m.rss > 0 && m.peak >= m.rss && m.anon > 0 && m.anon <= m.rss);
        assert!(ServerProcess::new(u32::MAX).is_err());
    }
}
