// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * What the OpenTelemetry tests share: an SDK meter provider read in memory,
 * sums by attributes, and a recording span made active through a context
 * manager on `AsyncLocalStorage` (what `@opentelemetry/context-async-hooks`
 * does), so that `trace.getActiveSpan()` finds it across a request's awaits.
 *
 * @module
 */

import {
  type Attributes,
  type Context,
  context,
  type ContextManager,
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  trace,
} from "@opentelemetry/api";
import {
  type DataPoint,
  MeterProvider,
  MetricReader,
} from "@opentelemetry/sdk-metrics";
import { AsyncLocalStorage } from "node:async_hooks";

/** A reader that only collects when asked. */
class InMemoryReader extends MetricReader {
  protected override onShutdown(): Promise<void> {
    return Promise.resolve();
  }
  protected override onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
}

/** One metric as the SDK collected it. */
export interface Collected {
  unit: string;
  points: DataPoint<unknown>[];
}

/** A meter provider and what its instruments hold now. */
export interface Metrics extends AsyncDisposable {
  meterProvider: MeterProvider;
  /** Every metric by name (cumulative). */
  collect(): Promise<Map<string, Collected>>;
  /** The sum of a counter's points whose attributes include `where`. */
  sum(name: string, where?: Attributes): Promise<number>;
}

/** Whether `attributes` include every pair of `where`. */
export function matches(attributes: Attributes, where: Attributes): boolean {
  return Object.entries(where).every(([k, v]) => attributes[k] === v);
}

/** An SDK `MeterProvider` with an in-memory reader. */
export function sdkMetrics(): Metrics {
  const reader = new InMemoryReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const collect = async () => {
    const { resourceMetrics, errors } = await reader.collect();
    if (errors.length > 0) throw errors[0];
    const found = new Map<string, Collected>();
    for (const scope of resourceMetrics.scopeMetrics) {
      for (const metric of scope.metrics) {
        found.set(metric.descriptor.name, {
          unit: metric.descriptor.unit,
          points: metric.dataPoints as DataPoint<unknown>[],
        });
      }
    }
    return found;
  };
  return {
    meterProvider,
    collect,
    async sum(name, where = {}) {
      const metric = (await collect()).get(name);
      let total = 0;
      for (const point of metric?.points ?? []) {
        if (matches(point.attributes, where)) total += point.value as number;
      }
      return total;
    },
    [Symbol.asyncDispose]: () => meterProvider.shutdown(),
  };
}

/** A span that keeps the attributes set on it. */
export class RecordingSpan implements Span {
  readonly attributes: Attributes = {};
  spanContext(): SpanContext {
    return INVALID_SPAN_CONTEXT;
  }
  setAttribute(key: string, value: Attributes[string]): this {
    this.attributes[key] = value;
    return this;
  }
  setAttributes(attributes: Attributes): this {
    Object.assign(this.attributes, attributes);
    return this;
  }
  addEvent(): this {
    return this;
  }
  addLink(): this {
    return this;
  }
  addLinks(): this {
    return this;
  }
  setStatus(): this {
    return this;
  }
  updateName(): this {
    return this;
  }
  end(): void {}
  isRecording(): boolean {
    return true;
  }
  recordException(): void {}
}

class AsyncContextManager implements ContextManager {
  #storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.#storage.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.#storage.disable();
    return this;
  }
}

/** Registers the context manager while the returned disposable lives. */
export function activeSpans(): Disposable & {
  within<T>(span: Span, run: () => T): T;
} {
  context.setGlobalContextManager(new AsyncContextManager());
  return {
    within: (span, run) =>
      context.with(trace.setSpan(context.active(), span), run),
    [Symbol.dispose]: () => context.disable(),
  };
}
