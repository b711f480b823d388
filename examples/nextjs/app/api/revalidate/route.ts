import { revalidateTag } from 'next/cache';

// On-demand revalidation from outside (a webhook): POST /api/revalidate?tag=catalog.
export async function POST(request: Request) {
  const tag = new URL(request.url).searchParams.get('tag');
  if (!tag) return Response.json({ error: 'tag required' }, { status: 400 });
  revalidateTag(tag, { expire: 0 });
  return Response.json({ revalidated: tag });
}
