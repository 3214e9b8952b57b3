// `make artifact`: packs the product (package.json "files") into .cache/artifact/fastfence.tgz,
// the file the Containerfile installs, and unpacks it with production dependencies only
// outside the checkout (harness/artifact.ts); prints where, its version and content hash.
// It changes nothing in the checkout but .cache/artifact.
import { ensureArtifact } from "../harness/artifact.ts";

const a = ensureArtifact({ log: (s) => console.error(s) });
console.log(`fastfence ${a.version} sha256:${a.sha256}`);
console.log(`tarball  ${a.tarball}`);
console.log(`unpacked ${a.dir}`);
