//! The examples printed after each command's `--help` (clap `after_help`), written as a
//! flux, oras, cosign or kubectl user would type them. docs/cli.md ("The command line")
//! shows the same commands; keep the two in step.

/// `ocisource --help`.
pub const ROOT: &str = "\
Conventions (as in kubectl, flux, oras and cosign):
  -o, --output FORMAT   the output format (yaml or json) of every command; never a path
  oci://host/repo:tag   an artifact by tag; oci://host/repo@sha256:<hex> by digest
  exit codes            0 ok, 1 the operation failed (or an object is not Ready),
                        2 invalid input, 3 signature verification failed
  stdout                the result (yaml or json); stderr: logs, progress and errors

Examples:
  ocisource push oci://ghcr.io/org/app-config:v1.0.0 --path ./deploy
  ocisource verify oci://ghcr.io/org/app-config:v1.0.0 --key cosign.pub
  ocisource pull oci://ghcr.io/org/app-config:v1.0.0 --output-file app.tar.gz
  ocisource reconcile -f ocirepository.yaml -o json
  ocisource version -o json
  source <(ocisource completion bash)";

/// `ocisource pull --help`.
pub const PULL: &str = "\
Examples:
  # A tag (or a digest) in the URL, as in flux pull artifact, oras and cosign
  ocisource pull oci://ghcr.io/org/app-config:v1.0.0 --output-file app.tar.gz
  ocisource pull oci://ghcr.io/org/app-config@sha256:3b6c...75de --output-file app.tar.gz

  # The tar.gz on stdout (nothing else is printed there), e.g. into tar
  ocisource pull oci://ghcr.io/org/app-config:v1.0.0 --output-file - | tar -xzf - -C ./app

  # Unpacked into a new or empty directory, as flux pull artifact -o DIR
  ocisource pull oci://ghcr.io/org/app-config:v1.0.0 --extract ./app

  # The highest version in a range, as spec.ref.semver picks it
  ocisource pull oci://ghcr.io/org/app-config --semver '>=1.0.0 <2.0.0' --output-file app.tar.gz

  # Verify the cosign signature first; nothing is written when it fails (exit 3)
  ocisource pull oci://ghcr.io/org/app-config:v1.0.0 --key cosign.pub --output-file app.tar.gz

  # A Helm chart layer stored byte for byte
  ocisource pull oci://ghcr.io/org/charts/app:1.2.3 \\
    --layer-media-type application/vnd.cncf.helm.chart.content.v1.tar+gzip \\
    --layer-operation copy --output-file app-1.2.3.tgz

  # Script on the result: the manifest digest and the digest of the written tar.gz
  ocisource pull oci://ghcr.io/org/app-config:v1.0.0 --output-file app.tar.gz -o json \\
    | jq -r '.manifestDigest, .archiveDigest'

Output fields: url, repository, tag (when resolved by tag or semver), revision
(<tag>@<manifestDigest>, as Flux reports it), manifestDigest (the OCI manifest: what
cosign signs and spec.ref.digest pins), archivePath, archiveDigest and archiveSize (the
tar.gz written), layers, metadata (the manifest's annotations), verified.";

/// `ocisource push --help`.
pub const PUSH: &str = "\
Examples:
  # A directory, as flux push artifact does (VCS files, images and archives left out)
  ocisource push oci://ghcr.io/org/app-config:$(git rev-parse --short HEAD) --path ./deploy \\
    --source \"$(git config --get remote.origin.url)\" \\
    --revision \"$(git branch --show-current)@sha1:$(git rev-parse HEAD)\"

  # Push, then sign the digest with cosign
  ocisource push oci://ghcr.io/org/app-config:v1.0.0 --path ./deploy -o json \\
    | jq -r '.repository + \"@\" + .digest' | xargs cosign sign --key cosign.key

  # Or sign while pushing, with a cosign key (COSIGN_PASSWORD unlocks cosign.key)
  ocisource push oci://ghcr.io/org/app-config:v1.0.0 --path ./deploy --sign-key cosign.key

  # One file, or standard input (stored as stdin.yaml)
  ocisource push oci://ghcr.io/org/app-config:v1.0.0 --path ./all.yaml
  kustomize build ./overlays/prod | ocisource push oci://ghcr.io/org/app-config:prod --path -

  # Your own exclusions (they replace the default media and archive patterns)
  ocisource push oci://ghcr.io/org/app-config:v1.0.0 --path . --ignore-paths '*.md,tests/'

Output fields (as flux push artifact -o json): url (oci://host/repo@sha256:...),
repository (host/repo), tag, digest; signature (the .sig tag) when signed.";

/// `ocisource verify --help`.
pub const VERIFY: &str = "\
Examples:
  # A key pair made by cosign generate-key-pair
  ocisource verify oci://ghcr.io/org/app-config:v1.0.0 --key cosign.pub

  # Keyless, signed in GitHub Actions: exact identity and issuer, as in cosign verify
  ocisource verify oci://ghcr.io/org/app-config@sha256:3b6c...75de \\
    --certificate-identity https://github.com/org/repo/.github/workflows/release.yaml@refs/tags/v1.0.0 \\
    --certificate-oidc-issuer https://token.actions.githubusercontent.com

  # Keyless with regular expressions (searched for, as in cosign: anchored here with ^...$)
  ocisource verify oci://ghcr.io/org/app-config:v1.0.0 \\
    --certificate-identity-regexp '^https://github.com/org/.*$' \\
    --certificate-oidc-issuer-regexp '^https://token.actions.githubusercontent.com$'

The result on stdout is cosign's (cosign verify -o json): a list of verified payloads,
{critical: {identity: {docker-reference}, image: {docker-manifest-digest}, type},
optional: {Method, Key | Subject and Issuer}}. Exit code 3 when no signature verifies.";

/// `ocisource reconcile --help`.
pub const RECONCILE: &str = "\
Examples:
  # Check an OCIRepository (and the Secrets it names) before it reaches a cluster
  ocisource reconcile -f ocirepository.yaml -f registry-secret.yaml

  # In CI: exit 1 unless every object is Ready; read the conditions with jq
  ocisource reconcile -f ocirepository.yaml -o json \\
    | jq -r '.items[] | .metadata.name + \": \" + (.status.conditions[] | select(.type == \"Ready\") | .message)'

The objects are printed as one kind: List (as kubectl get -o yaml|json prints them);
events go to stderr.";

/// `ocisource sign`.
pub const SIGN: &str = "\
Examples:
  # Sign a pushed image or artifact by digest (what release.sh does)
  COSIGN_PASSWORD=... ocisource sign oci://ghcr.io/ocisource/ocisource@sha256:<hex> --key cosign.key
  ocisource verify oci://ghcr.io/ocisource/ocisource@sha256:<hex> --key cosign.pub";

/// `ocisource version --help`.
pub const VERSION: &str = "\
Examples:
  ocisource version                                   # ocisource: v<version>
  ocisource version -o json | jq -r .clientVersion.version";

/// `ocisource completion --help`.
pub const COMPLETION: &str = "\
Examples:
  source <(ocisource completion bash)                 # this shell; or in ~/.bashrc
  ocisource completion zsh > \"${fpath[1]}/_ocisource\"
  ocisource completion fish > ~/.config/fish/completions/ocisource.fish";
