/**
 * Keeps each webhook's path at `/t/<token>/<route>`, or at the bare route when no token is used (taking
 * back a token path an earlier setting left; see webhook-path-token.ts in certs). Like the
 * caBundle publisher: every write is computed from a fresh read and guarded by a `test` of the
 * configuration's resourceVersion and of each webhook's name, so a concurrent change makes the write
 * fail and it is recomputed; nothing is written when every path is already right.
 */
import {
  describeRef,
  webhookPathPatch,
  type WebhookConfigurationClient,
  type WebhookConfigurationRef,
} from '@kd-connections/certs';
import { errorMessage, errorStatus, isConflict, type Logger } from '@kd-connections/shared/runtime';

const ATTEMPTS = 4;

export interface PathPublishResult {
  ref: WebhookConfigurationRef;
  exists: boolean;
  /** Webhooks whose path this call set. */
  changed: string[];
  error?: string;
}

export class WebhookPathPublisher {
  constructor(
    private readonly client: WebhookConfigurationClient,
    private readonly refs: readonly WebhookConfigurationRef[],
    private readonly routeOf: (webhookName: string) => string | undefined,
    private readonly log?: Logger,
  ) {}

  /** Points every webhook at `token` (bare when undefined), leaving paths behind a `keep` token as they are. */
  async publish(token: string | undefined, keep: readonly string[] = []): Promise<PathPublishResult[]> {
    const results: PathPublishResult[] = [];
    for (const ref of this.refs) results.push(await this.publishOne(ref, token, keep));
    return results;
  }

  private async publishOne(
    ref: WebhookConfigurationRef,
    token: string | undefined,
    keep: readonly string[],
  ): Promise<PathPublishResult> {
    const what = describeRef(ref);
    // An API error may quote the value it refused; errors reach logs, events and /readyz.
    const redacted = (e: unknown) => {
      let m = errorMessage(e);
      for (const t of [token, ...keep]) if (t) m = m.replaceAll(t, '<token>');
      return m;
    };
    for (let attempt = 1; ; attempt++) {
      let view;
      try {
        view = await this.client.read(ref);
      } catch (e) {
        if (errorStatus(e) === 404) return { ref, exists: false, changed: [] };
        return { ref, exists: true, changed: [], error: `${what}: cannot read: ${redacted(e)}` };
      }
      const patch = webhookPathPatch(view, token, this.routeOf, keep);
      if (patch.unknown.length > 0 && attempt === 1) {
        this.log?.warn('webhooks without a known route or with a path not ours keep it', {
          configuration: what,
          webhooks: patch.unknown,
        });
      }
      if (patch.ops.length === 0) return { ref, exists: true, changed: [] };
      const rv = view.metadata?.resourceVersion;
      try {
        await this.client.patch(ref, [
          ...(rv ? [{ op: 'test' as const, path: '/metadata/resourceVersion', value: rv }] : []),
          ...patch.ops,
        ]);
        // The token is never logged: the log is readable by more people than the configurations.
        this.log?.info('webhook paths published', { configuration: what, webhooks: patch.changed });
        return { ref, exists: true, changed: patch.changed };
      } catch (e) {
        if (isConflict(e) && attempt < ATTEMPTS) continue;
        return { ref, exists: true, changed: [], error: `${what}: cannot set the webhook paths: ${redacted(e)}` };
      }
    }
  }
}
