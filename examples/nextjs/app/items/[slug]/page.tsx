import { countRender, slow } from '../../../lib/renders';

// No path is built ahead: each is rendered on its first request, once for the whole fleet.
export const revalidate = 3600;
export const dynamicParams = true;
export function generateStaticParams() {
  return [];
}

export default async function ItemPage({ params }: { params: Promise<{ slug: string }> }) {
  const { slug } = await params;
  const render = await countRender(`item:${slug}`);
  await slow(300);
  return <p id="item">{`item ${slug}, render ${render}, by ${process.pid}`}</p>;
}
