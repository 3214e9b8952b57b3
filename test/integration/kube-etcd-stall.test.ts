// Needs real kube-apiserver, 3-member etcd: one member silent (SIGSTOP) stalls some requests.
// On a compact cluster a dead node takes an etcd member with it, and every surviving API
// server keeps its etcd client's connection to that member open until the client's
// keepalive gives up (tens of seconds): the requests it sends there go unanswered, the
// rest are answered at once. fastfence's client sends a request again (infra/kube/client.ts:
// reads and guarded writes cycle through the servers, the same one included, every
// readHedgeMs; a read within readBudgetMs, a write within one request deadline), so a stage
// behind a server in this state still reads and writes. The test first shows the stall is
// there: single attempts through the same server fail.
import { describe, expect, it } from "vitest";
import { startApiServers } from "../../harness/env/api-servers.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { Kube } from "../../infra/kube/client.ts";

const TIMEOUT_MS = 2000; // FASTFENCE_KUBE_TIMEOUT_MS's default
// 9 read attempts in the default budget (2 × the deadline), 8 write copies in one deadline:
// a miss is ~(1/3)^8
const HEDGE_MS = 250;

/** The member id and the leader's id etcd reports at `url` (its gRPC gateway). */
async function etcdStatus(url: string): Promise<{ id: string; leader: string }> {
  const r = await fetch(`${url}/v3/maintenance/status`, { method: "POST", body: "{}" });
  const j = (await r.json()) as { header: { member_id: string }; leader: string };
  return { id: j.header.member_id, leader: j.leader };
}

describe("an API server whose etcd member went silent (real kube-apiserver, 3-member etcd)", () => {
  const env = withEnv(async (scope) => scope.add(await startApiServers(1, { etcdMembers: 3 })));

  it("reads and guarded writes through it are done, where single attempts fail", async () => {
    const e = env();
    const server = e.servers[0]!.url;
    const kube = new Kube(e.kubeConfigFor(server), { requestTimeoutMs: TIMEOUT_MS, readHedgeMs: HEDGE_MS });
    await kube.read("read the default Namespace", (a) => a.core.readNamespace({ name: "default" }));
    // A follower, so no election runs while the test measures.
    const st = await Promise.all(e.etcd.map((m) => etcdStatus(m.url)));
    const silent = e.etcd[st.findIndex((s) => s.id !== s.leader)]!;
    silent.proc.signalGroup("SIGSTOP");
    try {
      // The stall: one attempt per read through the same server, its deadline the client's.
      const single = kube.apisAt(server);
      let singleFailed = 0;
      for (let i = 0; i < 20; i++)
        await single.core.readNamespace({ name: "default" }).catch(() => void singleFailed++);
      expect(singleFailed).toBeGreaterThan(0);

      const reads: number[] = [];
      for (let i = 0; i < 40; i++) {
        const t0 = performance.now();
        await kube.read("read the default Namespace", (a) => a.core.readNamespace({ name: "default" }));
        reads.push(Math.round(performance.now() - t0));
      }
      const writes: number[] = [];
      for (let i = 0; i < 20; i++) {
        const t0 = performance.now();
        const name = `stall-${process.pid}-${i}`;
        const cm = await kube.write(`create ConfigMap ${name}`, (a) =>
          a.core.createNamespacedConfigMap({ namespace: "default", body: { metadata: { name } } }),
        );
        writes.push(Math.round(performance.now() - t0));
        expect(cm.metadata?.name).toBe(name);
      }
      const sorted = [...reads].sort((x, y) => x - y);
      console.log(
        `single attempts failed ${singleFailed}/20; 40 reads all answered, p50 ${sorted[20]} ms, max ${sorted.at(-1)} ms; ` +
          `20 creates all done, max ${Math.max(...writes)} ms (hedge ${HEDGE_MS} ms)`,
      );
      expect(Math.max(...reads)).toBeLessThanOrEqual(2 * TIMEOUT_MS + 500);
      expect(Math.max(...writes)).toBeLessThanOrEqual(TIMEOUT_MS + 500);
    } finally {
      silent.proc.signalGroup("SIGCONT");
    }
  });
});
