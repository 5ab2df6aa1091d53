/**
 * One run at a time: a call while a run is under way joins it and asks for one more run after it,
 * so a change noticed mid-run is never missed and runs never overlap.
 */
export class SingleFlight {
  private running: Promise<void> | undefined;
  private again = false;

  /** `more` false stops the re-runs (e.g. once stopped). */
  constructor(
    private readonly body: () => Promise<void>,
    private readonly more: () => boolean = () => true,
  ) {}

  run(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.body();
      } while (this.again && this.more());
    })().finally(() => (this.running = undefined));
    return this.running;
  }
}
