//! A hostile bot for the runtime's tests: each flow misbehaves in one way. `start(flow(code))` and
//! `handle(text(code))` both run the behaviour named by `code`.
//!
//! - `loop`: never returns; `memory`: allocates until it dies; `stack`: recurses until it dies;
//!   `huge`: answers ~1 MB of steps (four times the default reply limit); `trap`: panics; `malformed`: answers a screen with no fields;
//! - `file`, `env`, `net`: try to read `/etc/passwd`, the environment and arguments, and the network,
//!   and answer a message saying what happened (never an error, so a test can read it);
//! - `sleep`: sleeps for a minute (blocking in the host, where no epoch check happens);
//! - `logs`: floods the log, then answers normally; `ok`: a normal message;
//! - `count`: answers how many calls its instance has served, this one included (1 when every call
//!   gets a fresh instance);
//! - `scatter`: writes one byte to every other page of a 4 MiB static buffer (512 separate dirty runs
//!   of memory, more than the pool's page scan collects at once) and answers how many of those bytes
//!   it found already written (0 when its memory was reset).

use hubbub_guest_sdk::{Bot, Context, Entry, FlowInfo, Reply, Screen, UserEvent, export_bot, log};

use std::sync::atomic::{AtomicU32, Ordering};

const FLOWS: [&str; 14] = [
    "loop",
    "memory",
    "stack",
    "huge",
    "trap",
    "malformed",
    "file",
    "env",
    "net",
    "sleep",
    "logs",
    "ok",
    "count",
    "scatter",
];

/// Calls this instance has served.
static CALLS: AtomicU32 = AtomicU32::new(0);

struct Evil;

impl Bot for Evil {
    type State = String;

    fn flows() -> Vec<FlowInfo> {
        FLOWS.iter().map(|code| FlowInfo::new(*code, *code)).collect()
    }

    fn start(entry: Entry, _ctx: Context) -> Result<Reply, String> {
        match entry {
            Entry::Flow(code) => misbehave(&code),
            Entry::Chat => Err("evil has no chat".to_string()),
        }
    }

    fn handle(_state: String, event: UserEvent, _ctx: Context) -> Result<Reply, String> {
        match event {
            UserEvent::Text(code) => misbehave(&code),
            other => Err(format!("evil expects text, got {other:?}")),
        }
    }
}

fn misbehave(code: &str) -> Result<Reply, String> {
    let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
    let reply = Reply::new(code);
    match code {
        "loop" => spin(),
        "memory" => hoard(),
        "stack" => Ok(reply.message(format!("depth {}", recurse(0)))),
        "huge" => {
            let line = "x".repeat(1000);
            Ok((0..1_000).fold(reply, |reply, _| reply.message(line.clone())))
        }
        "trap" => panic!("evil panics on purpose"),
        "malformed" => Ok(reply.screen(Screen::form("empty", "Nothing to fill in"))),
        "file" => {
            let outcome = match std::fs::read_to_string("/etc/passwd") {
                Ok(content) => format!("read /etc/passwd: {content}"),
                Err(e) => format!("file read failed: {e}"),
            };
            let listing = match std::fs::read_dir("/") {
                Ok(entries) => format!("listed /: {} entries", entries.count()),
                Err(e) => format!("listing failed: {e}"),
            };
            Ok(reply.message(outcome).message(listing))
        }
        "env" => {
            let vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
            let args: Vec<String> = std::env::args().collect();
            Ok(reply.message(format!(
                "env: {} vars [{}]; {} args [{}]",
                vars.len(),
                vars.join(", "),
                args.len(),
                args.join(", ")
            )))
        }
        "net" => {
            let outcome = match std::net::TcpStream::connect("127.0.0.1:80") {
                Ok(_) => "connected to 127.0.0.1:80".to_string(),
                Err(e) => format!("connect failed: {e}"),
            };
            Ok(reply.message(outcome))
        }
        "sleep" => {
            std::thread::sleep(std::time::Duration::from_secs(60));
            Ok(reply.message("slept"))
        }
        "logs" => {
            let line = "spam ".repeat(400);
            for _ in 0..1000 {
                log::info(&line);
            }
            Ok(reply.message("logged"))
        }
        "ok" => Ok(reply.message("ok")),
        "count" => Ok(reply.message(format!("call {calls} of this instance"))),
        "scatter" => {
            let (written, found) = scatter();
            Ok(reply.message(format!("{written} pages written, {found} found dirty")))
        }
        other => Err(format!("unknown behaviour {other}")),
    }
}

fn spin() -> ! {
    let mut n: u64 = 0;
    loop {
        n = core::hint::black_box(n.wrapping_add(1));
    }
}

fn hoard() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(core::hint::black_box(vec![1u8; 1 << 20]));
    }
}

const PAGE: usize = 4096;
const SCRATCH_BYTES: usize = 4 << 20;
/// Zero in a fresh instance (it is part of the module's zero-initialised data).
static mut SCRATCH: [u8; SCRATCH_BYTES] = [0; SCRATCH_BYTES];

/// Writes the first byte of every other page of `SCRATCH`; returns how many pages it wrote and how many
/// of those bytes were not zero before.
fn scatter() -> (usize, usize) {
    let base = (&raw mut SCRATCH).cast::<u8>();
    let (mut written, mut found) = (0, 0);
    for offset in (0..SCRATCH_BYTES).step_by(2 * PAGE) {
        // SAFETY: `offset` is within `SCRATCH`, and a guest call is single-threaded.
        unsafe {
            let byte = base.add(offset);
            if byte.read_volatile() != 0 {
                found += 1;
            }
            byte.write_volatile(0xAA);
        }
        written += 1;
    }
    (written, found)
}

#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let frame = core::hint::black_box([depth; 64]);
    recurse(depth + 1) + frame[(depth % 64) as usize]
}

export_bot!(Evil);
