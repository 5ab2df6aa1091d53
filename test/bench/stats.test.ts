/** The bench's verdicts over rounds: met or NOT met only when every round agrees, else within noise. */
import { describe, expect, it } from '@jest/globals';
import { spread, spreadText, spreadVerdict } from './stats.js';

describe('spread and its verdict', () => {
  it('median with the range the rounds moved in', () => {
    const s = spread([0.52, 0.47, 0.61, 0.5, 0.49]);
    expect(s).toEqual({ median: 0.5, min: 0.47, max: 0.61, rounds: 5 });
    expect(spreadText(s)).toBe('0.5 (0.47–0.61)');
  });

  it('met only when the whole range clears the target, NOT met only when none of it does', () => {
    expect(spreadVerdict(spread([0.81, 0.9, 0.85]), 0.8, 'atLeast')).toBe('met');
    expect(spreadVerdict(spread([0.5, 0.6, 0.79]), 0.8, 'atLeast')).toBe('NOT met');
    expect(spreadVerdict(spread([0.75, 0.82, 0.9]), 0.8, 'atLeast')).toBe('within noise');
    expect(spreadVerdict(spread([1.2, 1.4]), 1.5, 'atMost')).toBe('met');
    expect(spreadVerdict(spread([1.4, 1.6]), 1.5, 'atMost')).toBe('within noise');
    expect(spreadVerdict(spread([2.1, 2.3]), 1.5, 'atMost')).toBe('NOT met');
  });
});
