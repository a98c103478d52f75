/** Monthly active user allowance per tier (issue: free 10,000; pro 100,000; enterprise none). */
export const MAU_ALLOWANCE: Record<'free' | 'pro' | 'enterprise', number | null> = {
  free: 10_000,
  pro: 100_000,
  enterprise: null,
};
