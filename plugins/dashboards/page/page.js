// Draws a published dashboard (plugins/dashboards/page.ts) from the JSON block the server put in the
// page: no request leaves the page, and nothing from the data is ever parsed as HTML but the text
// cards' Markdown, which the server sanitized.
(function () {
  'use strict';
  var dashboard = JSON.parse(document.getElementById('dashboard-data').textContent);
  var root = document.documentElement;
  root.style.setProperty('--primary', dashboard.colors.primary);
  root.style.setProperty('--accent', dashboard.colors.accent);
  var palette = [dashboard.colors.primary, dashboard.colors.accent, '#5b8c5a', '#8e6c8a', '#c9a227', '#3b8ea5', '#b5523b'];

  function element(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function chart(body, option) {
    var holder = element('div', 'chart');
    body.appendChild(holder);
    var instance = echarts.init(holder, null, { renderer: 'canvas' });
    option.animation = false;
    option.color = palette;
    instance.setOption(option);
    window.addEventListener('resize', function () { instance.resize(); });
  }

  var draw = {
    metric: function (body, data) {
      var value = typeof data.value === 'number' ? data.value.toLocaleString('en') : data.value === null ? '\u2014' : data.value;
      body.appendChild(element('div', 'metric-value', value));
      body.appendChild(element('div', 'metric-label', data.label));
    },
    table: function (body, data) {
      var table = element('table');
      var head = table.createTHead().insertRow();
      data.columns.forEach(function (column) { head.appendChild(element('th', null, column.name)); });
      var rows = table.createTBody();
      data.rows.forEach(function (row) {
        var line = rows.insertRow();
        row.forEach(function (value) { line.insertCell().textContent = value === null ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value); });
      });
      body.appendChild(table);
    },
    text: function (body, data) {
      var holder = element('div', 'markdown');
      holder.innerHTML = data.html; // sanitized by the server (DOMPurify)
      body.appendChild(holder);
    },
    chart: function (body, data) {
      if (data.chart === 'pie') {
        var points = data.series.length ? data.series[0].points : [];
        chart(body, { tooltip: { trigger: 'item' }, series: [{ type: 'pie', radius: '65%', data: points.map(function (p) { return { name: String(p[0]), value: p[1] }; }) }] });
        return;
      }
      var numericX = data.chart === 'scatter' && data.series.every(function (s) { return s.points.every(function (p) { return typeof p[0] === 'number'; }); });
      var categories = [];
      if (!numericX) {
        data.series.forEach(function (s) { s.points.forEach(function (p) { var x = String(p[0]); if (categories.indexOf(x) < 0) categories.push(x); }); });
      }
      chart(body, {
        tooltip: { trigger: data.chart === 'scatter' ? 'item' : 'axis' },
        legend: data.series.length > 1 ? { top: 0 } : undefined,
        grid: { left: 48, right: 16, top: data.series.length > 1 ? 28 : 12, bottom: 28 },
        xAxis: numericX ? { type: 'value', name: data.x } : { type: 'category', data: categories, name: data.x },
        yAxis: { type: 'value' },
        series: data.series.map(function (s) {
          return {
            name: s.name,
            type: data.chart === 'area' ? 'line' : data.chart,
            areaStyle: data.chart === 'area' ? {} : undefined,
            data: s.points.map(function (p) { return [numericX ? p[0] : String(p[0]), p[1]]; }),
          };
        }),
      });
    },
    process_map: function (body, data) {
      // Activities in columns by their distance from a start activity (breadth first), so the map
      // reads left to right; each edge labelled with its count and median duration.
      var rank = {};
      var queue = data.start_activities.map(function (s) { rank[s.activity] = 0; return s.activity; });
      while (queue.length) {
        var from = queue.shift();
        data.edges.forEach(function (e) {
          if (e.from === from && rank[e.to] === undefined) { rank[e.to] = rank[from] + 1; queue.push(e.to); }
        });
      }
      var rows = {};
      var maxCount = Math.max.apply(null, data.nodes.map(function (n) { return n.count; }).concat([1]));
      var starts = data.start_activities.map(function (s) { return s.activity; });
      var ends = data.end_activities.map(function (s) { return s.activity; });
      var nodes = data.nodes.map(function (n) {
        var column = rank[n.activity] === undefined ? 0 : rank[n.activity];
        rows[column] = (rows[column] || 0) + 1;
        var color = starts.indexOf(n.activity) >= 0 ? dashboard.colors.accent : ends.indexOf(n.activity) >= 0 ? '#5b8c5a' : dashboard.colors.primary;
        return { name: n.activity, value: n.count, x: column * 160, y: rows[column] * 90, symbolSize: 24 + 36 * (n.count / maxCount), itemStyle: { color: color }, label: { show: true, position: 'bottom', formatter: n.activity + ' (' + n.count + ')' } };
      });
      var known = {};
      nodes.forEach(function (n) { known[n.name] = true; });
      var duration = function (s) { return s === null ? '' : s < 120 ? Math.round(s) + ' s' : s < 7200 ? Math.round(s / 60) + ' min' : Math.round(s / 3600) + ' h'; };
      chart(body, {
        tooltip: {},
        series: [{
          type: 'graph',
          layout: 'none',
          roam: true,
          edgeSymbol: ['none', 'arrow'],
          edgeSymbolSize: 9,
          data: nodes,
          // An edge only between nodes drawn (a map cut at its row limit may lack some).
          links: data.edges.filter(function (e) { return known[e.from] && known[e.to]; }).map(function (e) {
            return { source: e.from, target: e.to, value: e.count, lineStyle: { width: 1 + 4 * (e.count / maxCount), curveness: 0.2 }, label: { show: true, formatter: e.count + ' \u00b7 ' + duration(e.median_duration_s) } };
          }),
          lineStyle: { color: '#8a94a6', opacity: 0.9 },
        }],
      });
      body.appendChild(element('div', 'metric-label', data.cases + ' cases'));
    },
  };

  var grid = document.getElementById('grid');
  dashboard.cards.forEach(function (card) {
    var section = element('section', 'card');
    section.dataset.cardId = String(card.id);
    section.dataset.cardType = card.type;
    section.style.gridColumn = card.layout.x + 1 + ' / span ' + card.layout.w;
    section.style.gridRow = card.layout.y + 1 + ' / span ' + card.layout.h;
    if (card.title) section.appendChild(element('h2', null, card.title));
    var body = element('div', 'card-body');
    section.appendChild(body);
    grid.appendChild(section);
    if (card.error !== null) body.appendChild(element('div', 'card-error', card.error));
    else if (draw[card.type]) draw[card.type](body, card.data);
    else body.appendChild(element('pre', null, JSON.stringify(card.data, null, 2)));
  });
  document.body.dataset.rendered = 'true';
})();
