//! Compiling a component into its precompiled artifact. A host compiles in a child process
//! (`hubbub compile-component`) whose memory is bounded by `RLIMIT_DATA` and whose time is bounded by a
//! deadline after which it is killed: Cranelift's memory grows with the component (a 1 MB component
//! peaks near 0.5 GB) and a compilation cannot be interrupted in a thread, so only a process can be
//! stopped and bounded. Tools and tests that compile their own components may compile in-process.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use wasmtime::Engine;
use wasmtime::component::Component;

use super::{RuntimeError, truncate};

/// Where compilations run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Compiler {
    /// On a blocking thread of this process, unbounded: for tools and tests that trust their components.
    #[default]
    InProcess,
    /// In a child process, bounded.
    Process(CompileLimits),
}

/// What one compilation in a child process may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileLimits {
    /// The executable run as `<exe> compile-component --input … --output …` (the `hubbub` binary).
    pub exe: PathBuf,
    /// Its data memory (`RLIMIT_DATA`: heap and anonymous mappings), in bytes.
    pub memory_bytes: u64,
    /// Its wall-clock time; past it, it is killed.
    pub timeout: Duration,
}

/// Compiles the component in `input` with `engine` and writes its artifact to `output` under a temporary
/// name, renamed when complete (a reader never sees half a file). What `hubbub compile-component` runs.
pub fn compile_artifact(engine: &Engine, input: &Path, output: &Path) -> anyhow::Result<()> {
    let component = Component::from_file(engine, input)?;
    let bytes = component.serialize()?;
    let temporary = output.with_extension(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, output).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })?;
    Ok(())
}

/// Compiles `input` to the artifact `output` in a child process within `limits`.
pub(super) async fn compile_in_child(limits: &CompileLimits, input: &Path, output: &Path) -> Result<(), RuntimeError> {
    let mut command = tokio::process::Command::new(&limits.exe);
    command
        .arg("compile-component")
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(output)
        .env_clear()
        .env("HUBBUB_LOG", "error")
        // jemalloc (the binary's allocator, `src/main.rs`) with one arena: under a tight limit the child then
        // fails as it starts its threads instead of, now and then, never finishing the abort of a failed
        // allocation (7 of 80 tries at 16 MiB ran on to the deadline with jemalloc's defaults, none of 80
        // with one arena). glibc's malloc ignores it.
        .env("MALLOC_CONF", "narenas:1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let memory = limits.memory_bytes;
    // SAFETY: between fork and exec only `setrlimit`, which is async-signal-safe, runs.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit { rlim_cur: memory as libc::rlim_t, rlim_max: memory as libc::rlim_t };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = command.spawn().map_err(|e| {
        tracing::error!(error = %e, exe = %limits.exe.display(), "cannot start the component compiler");
        RuntimeError::InvalidComponent("the compiler could not be started".into())
    })?;
    let mib = limits.memory_bytes >> 20;
    // On the deadline the child is dropped, which kills it (`kill_on_drop`).
    let output = match tokio::time::timeout(limits.timeout, child.wait_with_output()).await {
        Err(_) => {
            let secs = limits.timeout.as_secs_f64();
            return Err(RuntimeError::InvalidComponent(format!("compiling took longer than {secs} s (the limit)")));
        }
        Ok(Err(e)) => return Err(RuntimeError::InvalidComponent(format!("the compiler failed: {e}"))),
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let said = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let said = said.strip_prefix("Error: ").unwrap_or(said);
    // Out of its memory: an allocation failed (an abort, or the error saying so), or the compiler could not
    // start its threads — each thread's stack is a mapping that counts against `RLIMIT_DATA`, the only limit
    // set on the child, so `EAGAIN` there means the limit (jemalloc's own mappings can take the budget before
    // any allocation fails).
    let out_of_memory = {
        use std::os::unix::process::ExitStatusExt;
        output.status.signal() == Some(libc::SIGABRT)
            || stderr.contains("memory allocation")
            || stderr.contains("Cannot allocate memory")
            || stderr.contains("Resource temporarily unavailable")
    };
    if out_of_memory {
        return Err(RuntimeError::InvalidComponent(format!(
            "compiling needed more than {mib} MiB of memory (the limit)"
        )));
    }
    Err(RuntimeError::InvalidComponent(truncate(said, 300)))
}
