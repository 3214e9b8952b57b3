// A simulated node for BMC tests: a process group (default `sleep`) that a lab BMC's
// power-off kills and power-on starts. Used as the lab Redfish emulator's hooks.
// Never touches processes it did not start.
import { pidAlive, spawnGroup, type Spawned } from "./bmc-spawn.ts";

export class SimNode {
  private proc: Spawned | undefined;
  private readonly name: string;
  private readonly cmd: string[];

  constructor(name: string, cmd: string[] = ["sleep", "100000"]) {
    this.name = name;
    this.cmd = cmd;
  }

  get pid(): number | undefined {
    return this.proc?.alive() ? this.proc.pid : undefined;
  }

  running(): boolean {
    return !!this.proc && this.proc.alive() && pidAlive(this.proc.pid);
  }

  start(): void {
    if (this.running()) return;
    this.proc = spawnGroup(`node-${this.name}`, this.cmd[0]!, this.cmd.slice(1));
  }

  /** Kills the node's whole process group with SIGKILL (a power cut) and waits for it. */
  async kill(): Promise<void> {
    await this.proc?.stop(0);
  }

  /** Hooks for LabRedfishServer. */
  hooks() {
    return { powerOff: () => this.kill(), powerOn: () => this.start() };
  }
}
