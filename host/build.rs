//! Builds the end-user web app (`web/`, TypeScript bundled by Vite) into `web/dist`, which the `hubbub`
//! binary embeds (`http::app`).
//!
//! `npm ci` runs when `node_modules` is missing or older than the lockfile, then `npm run build`.
//! `HUBBUB_WEB_PREBUILT=1` skips both and takes the `web/dist` that is there (a container's Node stage built
//! it); it must hold an `index.html`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=HUBBUB_WEB_PREBUILT");
    // Read when the script runs, not when it was compiled: cargo may reuse a compiled build script for a
    // checkout of the same sources in another folder.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let web = Path::new(&manifest_dir).join("../web");
    let web = web.canonicalize().unwrap_or(web);
    for input in [
        "src",
        "public",
        "index.html",
        "console",
        "dashboard",
        "package.json",
        "package-lock.json",
        "vite.config.ts",
        "vite.pages.config.ts",
        "tsconfig.json",
    ] {
        println!("cargo:rerun-if-changed={}", web.join(input).display());
    }
    let dist = web.join("dist");
    if std::env::var_os("HUBBUB_WEB_PREBUILT").is_some() {
        println!("cargo:rerun-if-changed={}", dist.display());
        if !dist.join("index.html").is_file() {
            fail(&format!("HUBBUB_WEB_PREBUILT is set but {} has no index.html", dist.display()));
        }
        return;
    }
    if !web.join("package.json").is_file() {
        fail(&format!("{} has no package.json: the web app's sources are missing", web.display()));
    }
    if Command::new("npm").arg("--version").output().is_err() {
        fail(
            "npm was not found: building hubbub builds its web app (web/) with Node.js and npm. Install Node.js 20 \
             or later with npm (Debian: apt-get install nodejs npm), or build web/ elsewhere into web/dist and \
             set HUBBUB_WEB_PREBUILT=1.",
        );
    }
    let modules = web.join("node_modules/.package-lock.json");
    let lock = web.join("package-lock.json");
    if !modules.is_file() || modified(&lock) > modified(&modules) {
        npm(&web, &["ci", "--no-audit", "--no-fund"]);
    }
    npm(&web, &["run", "build"]);
    if !dist.join("index.html").is_file() {
        fail(&format!("npm run build left no {}", dist.join("index.html").display()));
    }
}

/// Runs npm in `dir`; its output is shown only when it fails (a build script's stdout is cargo's).
fn npm(dir: &Path, args: &[&str]) {
    match Command::new("npm").args(args).current_dir(dir).output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            eprintln!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            fail(&format!("`npm {}` in {} failed ({}); its output is above", args.join(" "), dir.display(), out.status))
        }
        Err(e) => fail(&format!("`npm {}` could not run: {e}", args.join(" "))),
    }
}

fn modified(path: &Path) -> std::time::SystemTime {
    path.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH)
}

fn fail(why: &str) -> ! {
    eprintln!("error: {why}");
    panic!("{why}");
}
