/**
 * An in-memory Lease endpoint for leader-election unit tests: one Lease, JSON Patch with `test`
 * preconditions (applied by fast-json-patch, as the API server would), a resourceVersion bumped on every
 * write. Each replica talks to it through its own client, which can be made to fail at once or to hang
 * until its request is aborted — the two ways an unreachable API server behaves.
 */
import jsonpatch, { type Operation } from 'fast-json-patch';
import { KubeApiError, type RequestOptions } from '@kd-connections/shared/runtime';
import type { LeaseClient } from '../src/leader-election.js';
import type { FakeClock } from '../../shared/test/fake-clock.js';

interface StoredLease {
  metadata: { name: string; namespace: string; resourceVersion: string };
  spec: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string; leaseTransitions?: number };
}

export class FakeLeaseApi {
  lease: StoredLease | undefined;
  private rv = 0;
  /** Every successful write: who, when (fake time), the holder it left. */
  readonly writes: { by: string; at: number; holder: string | undefined }[] = [];

  constructor(readonly clock: FakeClock) {}

  client(identity: string): FakeLeaseClient {
    return new FakeLeaseClient(this, identity);
  }

  /** Time of the last successful write by `identity` that left it holding the lease. */
  lastRenewBy(identity: string): number | undefined {
    return this.writes.filter((w) => w.by === identity && w.holder === identity).at(-1)?.at;
  }

  get(): StoredLease {
    if (!this.lease) throw new KubeApiError(404, 'NotFound', 'leases "x" not found');
    return structuredClone(this.lease);
  }

  create(by: string, body: StoredLease): StoredLease {
    if (this.lease) throw new KubeApiError(409, 'AlreadyExists', 'leases "x" already exists');
    this.lease = { ...structuredClone(body), metadata: { ...body.metadata, resourceVersion: String(++this.rv) } };
    this.writes.push({ by, at: this.clock.now(), holder: this.lease.spec.holderIdentity });
    return structuredClone(this.lease);
  }

  patch(by: string, ops: Operation[]): StoredLease {
    if (!this.lease) throw new KubeApiError(404, 'NotFound', 'leases "x" not found');
    let next: StoredLease;
    try {
      next = jsonpatch.applyPatch(structuredClone(this.lease), ops, true, false).newDocument;
    } catch (e) {
      throw new KubeApiError(422, 'Invalid', `the server rejected our request: ${(e as Error).message}`);
    }
    next.metadata.resourceVersion = String(++this.rv);
    this.lease = next;
    this.writes.push({ by, at: this.clock.now(), holder: next.spec.holderIdentity });
    return structuredClone(next);
  }
}

export class FakeLeaseClient implements LeaseClient {
  /** ok: answered at once; fail: refused at once; hang: no answer until the request is aborted. */
  mode: 'ok' | 'fail' | 'hang' = 'ok';
  /** Requests waiting for an answer that will never come (mode hang), for boundedness checks. */
  pending = 0;
  /** Hanging requests cut by their signal, with how long (fake ms) each hung. */
  readonly aborted: number[] = [];

  constructor(
    private readonly api: FakeLeaseApi,
    private readonly identity: string,
  ) {}

  get<T>(_path: string, opts: RequestOptions = {}): Promise<T> {
    return this.answer(opts.signal, () => this.api.get() as T);
  }

  request<T>(method: string, _path: string, opts: RequestOptions & { body?: unknown } = {}): Promise<T> {
    if (method !== 'POST') throw new Error(`unexpected ${method}`);
    return this.answer(opts.signal, () => this.api.create(this.identity, opts.body as StoredLease) as T);
  }

  jsonPatch<T>(_path: string, ops: unknown[], opts: RequestOptions = {}): Promise<T> {
    return this.answer(opts.signal, () => this.api.patch(this.identity, ops as Operation[]) as T);
  }

  private answer<T>(signal: AbortSignal | undefined, fn: () => T): Promise<T> {
    if (this.mode === 'fail') return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6443'));
    if (this.mode === 'ok') return Promise.resolve().then(fn);
    const since = this.api.clock.now();
    this.pending++;
    return new Promise<T>((_ok, fail) => {
      const cut = () => {
        this.pending--;
        this.aborted.push(this.api.clock.now() - since);
        fail(Object.assign(new Error('aborted'), { name: 'AbortError' }));
      };
      if (signal?.aborted) return cut();
      signal?.addEventListener('abort', cut, { once: true });
    });
  }
}
