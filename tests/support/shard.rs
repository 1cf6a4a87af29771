//! A kustomize-controller of the test's own, next to the one `hack/cluster.sh flux` runs:
//! Flux's sharding (`--watch-label-selector=sharding.fluxcd.io/key=<key>`; the shared one
//! runs with `!sharding.fluxcd.io/key`), so a test can give it its own environment (e.g.
//! `SOURCE_CONTROLLER_LOCALHOST`) without the shared controller touching its objects.

use std::path::Path;
use std::process::{Child, Command};

use super::cluster::{free_addr, Cluster};

/// The shard label key Flux uses.
pub const SHARD_KEY: &str = "sharding.fluxcd.io/key";

/// A running kustomize-controller shard; killed on drop.
pub struct KustomizeShard {
    child: Child,
    /// Its log file.
    pub log: std::path::PathBuf,
}

impl KustomizeShard {
    /// Starts the kustomize-controller built by `hack/cluster.sh` (`OCISOURCE_TEST_KUSTOMIZE_CONTROLLER`)
    /// as admin, for objects labelled `sharding.fluxcd.io/key=<key>` in `ns`, with `env`
    /// added to its environment and its files under `work`.
    pub fn start(
        cluster: &Cluster,
        ns: &str,
        key: &str,
        env: &[(&str, &str)],
        work: &Path,
    ) -> Self {
        let binary = std::env::var("OCISOURCE_TEST_KUSTOMIZE_CONTROLLER")
            .expect("OCISOURCE_TEST_KUSTOMIZE_CONTROLLER (from `hack/cluster.sh env`)");
        let tmp = work.join("kustomize-tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        let log = work.join("kustomize-controller.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(binary)
            .args([
                format!("--health-addr={}", free_addr()),
                format!("--metrics-addr={}", free_addr()),
                "--enable-leader-election=false".into(),
                "--watch-all-namespaces=false".into(),
                format!("--watch-label-selector={SHARD_KEY}={key}"),
                "--feature-gates=ExternalArtifact=true".into(),
                "--no-remote-bases=true".into(),
                "--log-encoding=json".into(),
            ])
            .env("KUBECONFIG", &cluster.admin_kubeconfig)
            .env("RUNTIME_NAMESPACE", ns)
            .env("TMPDIR", &tmp)
            .envs(env.iter().copied())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        Self { child, log }
    }

    /// Its log so far (for failure messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for KustomizeShard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
