'use server';

import { updateTag } from 'next/cache';

// A server action: the catalog changed; every process serves the new one from its next request
// (and this request reads its own write).
export async function catalogChanged() {
  updateTag('catalog');
}
