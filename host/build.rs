//! Builds the end-user web app (`web/`, TypeScript bundled by Vite) that the `hubbub` binary serves, and
//! tells the crate where the built files are (`HUBBUB_WEB_DIR`, read by `http::app`'s embed).
//!
//! `HUBBUB_WEB_DIST=/path/to/dist` skips the build and embeds an app built elsewhere (a container's Node
//! stage, a packager). Otherwise `npm ci` (when `node_modules` is missing or older than the lockfile) and
//! `npm run build` run in `web/`, whose output is `web/dist`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=HUBBUB_WEB_DIST");
    if let Ok(prebuilt) = std::env::var("HUBBUB_WEB_DIST") {
        let dist = PathBuf::from(prebuilt);
        if !dist.join("index.html").is_file() {
            fail(&format!("HUBBUB_WEB_DIST={} has no index.html: build the web app there first", dist.display()));
        }
        println!("cargo:rerun-if-changed={}", dist.display());
        println!("cargo:rustc-env=HUBBUB_WEB_DIR={}", dist.display());
        return;
    }

    let web = Path::new(env!("CARGO_MANIFEST_DIR")).join("../web");
    let web = web.canonicalize().unwrap_or(web);
    for input in ["src", "public", "index.html", "package.json", "package-lock.json", "vite.config.ts", "tsconfig.json"]
    {
        println!("cargo:rerun-if-changed={}", web.join(input).display());
    }
    if !web.join("package.json").is_file() {
        fail(&format!("{} has no package.json: the web app's sources are missing", web.display()));
    }
    if Command::new("npm").arg("--version").output().is_err() {
        fail(
            "npm was not found: building hubbub builds its web app (web/) with Node.js and npm. Install Node.js 20 \
             or later with npm (Debian: apt-get install nodejs npm), or set HUBBUB_WEB_DIST to an app built \
             elsewhere.",
        );
    }
    let modules = web.join("node_modules/.package-lock.json");
    let lock = web.join("package-lock.json");
    if !modules.is_file() || modified(&lock) > modified(&modules) {
        npm(&web, &["ci", "--no-audit", "--no-fund"]);
    }
    npm(&web, &["run", "build"]);
    let dist = web.join("dist");
    if !dist.join("index.html").is_file() {
        fail(&format!("npm run build left no {}", dist.join("index.html").display()));
    }
    println!("cargo:rustc-env=HUBBUB_WEB_DIR={}", dist.display());
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
