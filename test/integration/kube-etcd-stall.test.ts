// Needs real kube-apiserver, 3-member etcd: one member silent (SIGSTOP) stalls some requests.
// On a compact cluster a dead node takes an etcd member with it, and every surviving API
// server keeps its etcd client's connection to that member open until the client's
// keepalive gives up (tens of seconds): the requests it sends there go unanswered, the
// rest are answered at once. fastfence's client sends a read again (infra/kube/client.ts:
// reads cycle through the servers, the same one included, every readHedgeMs within
// readBudgetMs), so a stage behind a server in this state still reads. The test first shows
// the stall is there: single attempts through the same server fail. (A write is not sent
// twice at once; call() fails over to another server after its deadline.)
import { describe, expect, it } from "vitest";
import { startApiServers } from "../../harness/env/api-servers.ts";
import { withEnv } from "../../harness/env/with-env.ts";
import { Kube } from "../../infra/kube/client.ts";

const TIMEOUT_MS = 2000; // FASTFENCE_KUBE_TIMEOUT_MS's default
const HEDGE_MS = 250; // 9 reads in the default budget (2 × the deadline): a miss is ~(1/3)^9

/** The member id and the leader's id etcd reports at `url` (its gRPC gateway). */
async function etcdStatus(url: string): Promise<{ id: string; leader: string }> {
  const r = await fetch(`${url}/v3/maintenance/status`, { method: "POST", body: "{}" });
  const j = (await r.json()) as { header: { member_id: string }; leader: string };
  return { id: j.header.member_id, leader: j.leader };
}

describe("an API server whose etcd member went silent (real kube-apiserver, 3-member etcd)", () => {
  const env = withEnv(async (scope) => scope.add(await startApiServers(1, { etcdMembers: 3 })));

  it("reads through it are answered, where single attempts fail", async () => {
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
      const sorted = [...reads].sort((x, y) => x - y);
      console.log(
        `single attempts failed ${singleFailed}/20; 40 reads all answered, p50 ${sorted[20]} ms, max ${sorted.at(-1)} ms (hedge ${HEDGE_MS} ms)`,
      );
      expect(Math.max(...reads)).toBeLessThanOrEqual(2 * TIMEOUT_MS + 500);
    } finally {
      silent.proc.signalGroup("SIGCONT");
    }
  });
});
